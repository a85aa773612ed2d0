// The server's OpenAI routes as the chat uses them: the model list and a streamed chat
// completion (SSE over fetch, so a stop is an abort that closes the connection and the server
// drops the request). URLs are relative: the page works behind a proxy that serves it under a
// path prefix too.

export class ApiError extends Error {
  constructor(message, status, code) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

function headers(apiKey) {
  const h = { 'Content-Type': 'application/json' };
  if (apiKey) h.Authorization = 'Bearer ' + apiKey;
  return h;
}

// An error response as an ApiError with the server's own message.
async function errorOf(res) {
  const text = await res.text().catch(() => '');
  let message = text.trim() || res.statusText;
  let code = null;
  try {
    const e = JSON.parse(text).error;
    if (e && e.message) {
      message = e.message;
      code = e.code || null;
    }
  } catch {
    // not JSON: the text as it came
  }
  return new ApiError(`${res.status}: ${message}`, res.status, code);
}

// ["model id", ...]
export async function listModels(apiKey) {
  const res = await fetch('v1/models', { headers: headers(apiKey) });
  if (!res.ok) throw await errorOf(res);
  const body = await res.json();
  return (body.data || []).map((m) => m.id);
}

// Yields the stream's chunks as parsed JSON until [DONE]. An error event in the stream (the
// server met it after the 200) is thrown as an ApiError; an abort through `signal` throws the
// fetch's AbortError.
export async function* streamChat(body, apiKey, signal) {
  const res = await fetch('v1/chat/completions', {
    method: 'POST',
    headers: headers(apiKey),
    body: JSON.stringify({ ...body, stream: true }),
    signal,
  });
  if (!res.ok) throw await errorOf(res);
  const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += value;
    let end;
    while ((end = buffer.search(/\r?\n\r?\n/)) >= 0) {
      const event = buffer.slice(0, end);
      buffer = buffer.slice(end).replace(/^\r?\n\r?\n/, '');
      const data = event
        .split(/\r?\n/)
        .filter((l) => l.startsWith('data:'))
        .map((l) => l.slice(5).replace(/^ /, ''))
        .join('\n');
      if (data === '') continue;
      if (data === '[DONE]') return;
      const chunk = JSON.parse(data);
      if (chunk.error) throw new ApiError(`in the stream: ${chunk.error.message}`, 200, chunk.error.code);
      yield chunk;
    }
  }
  throw new ApiError('in the stream: it ended without [DONE] (the connection closed)', 200, null);
}
