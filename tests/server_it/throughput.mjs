// Throughput of jitllmd at several client counts (not a ctest test; run by hand):
//   node tests/server_it/throughput.mjs BASE_URL [clients,...] [requests per client] [max_tokens]
// Each client streams completions one after another (bounded loop); reported: generated tokens
// per second over the wall time, mean time to first token, mean inter-token gap.
const [base, clientsArg = '1,4,16', perClientArg = '3', maxTokensArg = '64'] = process.argv.slice(2);
const prompts = ['The function returns', 'A list is', 'To open a file', 'The module provides',
  'Exceptions are raised when', 'The class', 'In Python, a dictionary', 'Use the following'];

async function one(i, maxTokens) {
  const t0 = performance.now();
  const res = await fetch(base + '/v1/completions', {
    method: 'POST', headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ prompt: prompts[i % prompts.length], max_tokens: maxTokens,
      temperature: 0.8, seed: i, ignore_eos: true, stream: true }),
  });
  if (!res.ok) throw new Error(`status ${res.status}`);
  let ttft = null, last = null, gaps = 0, nGaps = 0, tokens = 0, buf = '';
  const decoder = new TextDecoder();
  for await (const part of res.body) {
    buf += decoder.decode(part, { stream: true });
    let k;
    while ((k = buf.indexOf('\n\n')) >= 0) {
      const line = buf.slice(0, k);
      buf = buf.slice(k + 2);
      if (!line.startsWith('data: {')) continue;
      const now = performance.now();
      const chunk = JSON.parse(line.slice(6));
      if (chunk.usage) tokens = chunk.usage.completion_tokens;
      if (ttft === null) ttft = now - t0; else { gaps += now - last; nGaps++; }
      last = now;
    }
  }
  return { tokens, ttft, gap: nGaps ? gaps / nGaps : 0 };
}

for (const clients of clientsArg.split(',').map(Number)) {
  const t0 = performance.now();
  const results = await Promise.all(Array.from({ length: clients }, async (_, c) => {
    const out = [];
    for (let r = 0; r < Number(perClientArg); r++) out.push(await one(c * 100 + r, Number(maxTokensArg)));
    return out;
  }));
  const wall = (performance.now() - t0) / 1000;
  const all = results.flat();
  const tokens = all.reduce((s, r) => s + r.tokens, 0);
  const mean = (f) => all.reduce((s, r) => s + f(r), 0) / all.length;
  console.log(`clients ${String(clients).padStart(2)}: ${all.length} requests, ${tokens} tokens in ` +
    `${wall.toFixed(2)} s = ${(tokens / wall).toFixed(1)} tok/s; mean TTFT ${mean((r) => r.ttft).toFixed(1)} ms, ` +
    `mean inter-token ${mean((r) => r.gap).toFixed(1)} ms`);
}
