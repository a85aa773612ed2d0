// Load generator for OpenAI-style servers (jitllmd, llama-server, vLLM): C closed-loop clients
// for a fixed time, each streaming one request after another; prints output tok/s over the
// wall, TTFT and inter-token latency percentiles, and errors. The same client for every server,
// so their numbers compare. A benchmark, not a test (never run by ctest).
//
//   node bench/serve/load.mjs --url http://127.0.0.1:8080 --clients 1,16,64 --seconds 30 \
//        [--route completions|chat] [--prompt-tokens 128] [--max-tokens 128] [--model NAME]
//        [--json OUT.json]
//
// Prompts are N copies of one short word sequence (about --prompt-tokens tokens for a llama
// vocabulary; the usage the server reports is what counts), different per client so no server
// shares a prefix between clients. Generation ignores EOS where the server knows ignore_eos
// (jitllmd, llama-server); tokens are counted from the server's usage, else from the chunks.
import { writeFileSync } from 'node:fs';

const args = Object.fromEntries(process.argv.slice(2).reduce((acc, a, i, all) => {
  if (a.startsWith('--')) acc.push([a.slice(2), all[i + 1]]);
  return acc;
}, []));
const url = args.url ?? 'http://127.0.0.1:8080';
const clientCounts = (args.clients ?? '1,16').split(',').map(Number);
const seconds = Number(args.seconds ?? 20);
const route = args.route ?? 'completions';
const promptTokens = Number(args['prompt-tokens'] ?? 128);
const maxTokens = Number(args['max-tokens'] ?? 128);
const model = args.model;

const words = 'the quick brown fox jumps over a lazy dog while seven wizards quietly judge boxes';
function promptFor(client) {
  // ~1 token per word for llama-like vocabularies; a client-specific head breaks shared prefixes.
  const n = Math.max(1, promptTokens - 4);
  const body = Array.from({ length: n }, (_, i) => words.split(' ')[(i + client) % 15]).join(' ');
  return `Client ${client} says: ${body}`;
}

function requestBody(client) {
  const common = { max_tokens: maxTokens, temperature: 0, ignore_eos: true, stream: true,
    stream_options: { include_usage: true }, ...(model ? { model } : {}) };
  if (route === 'chat')
    return { ...common, messages: [{ role: 'user', content: promptFor(client) }] };
  return { ...common, prompt: promptFor(client) };
}

async function oneRequest(client, deadline) {
  const t0 = performance.now();
  const res = await fetch(`${url}/v1/${route === 'chat' ? 'chat/completions' : 'completions'}`, {
    method: 'POST', headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify(requestBody(client)),
  });
  if (!res.ok) throw new Error(`status ${res.status}: ${(await res.text()).slice(0, 200)}`);
  const decoder = new TextDecoder();
  let buf = '', ttft = null, last = null, chunks = 0, inWindow = 0, usage = null;
  const gaps = [];
  for await (const part of res.body) {
    buf += decoder.decode(part, { stream: true });
    let k;
    while ((k = buf.indexOf('\n\n')) >= 0) {
      const line = buf.slice(0, k).trim();
      buf = buf.slice(k + 2);
      if (!line.startsWith('data: {')) continue;
      const chunk = JSON.parse(line.slice(6));
      if (chunk.error) throw new Error(JSON.stringify(chunk.error));
      if (chunk.usage) usage = chunk.usage;
      const text = chunk.choices?.[0]?.text ?? chunk.choices?.[0]?.delta?.content ?? '';
      if (!text) continue;
      const now = performance.now();
      if (ttft === null) ttft = now - t0; else gaps.push(now - last);
      last = now;
      chunks++;
      if (now <= deadline) inWindow++;
    }
  }
  // A request that ended in the window counts its reported tokens; one that crossed the end
  // counts the chunks that arrived before it (one per token on jitllmd and llama-server).
  const done = performance.now() <= deadline;
  return { tokens: done ? usage?.completion_tokens ?? chunks : inWindow, ttft, gaps, done };
}

function pct(xs, p) {
  if (!xs.length) return NaN;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(p / 100 * s.length))];
}

const rows = [];
for (const clients of clientCounts) {
  const start = performance.now();
  const deadline = start + seconds * 1000;
  let tokens = 0, errors = 0, requests = 0;
  const ttfts = [], gaps = [];
  let firstError = '';
  await Promise.all(Array.from({ length: clients }, async (_, c) => {
    while (performance.now() < deadline) {
      try {
        const r = await oneRequest(c, deadline);
        tokens += r.tokens;
        if (!r.done) break;
        requests++;
        if (r.ttft !== null) ttfts.push(r.ttft);
        gaps.push(...r.gaps);
      } catch (e) {
        errors++;
        firstError ||= String(e.message ?? e);
        if (performance.now() > deadline) break;
      }
    }
  }));
  const wall = deadline - start;
  const row = { clients, requests, errors, output_tok_s: tokens / (wall / 1000),
    ttft_ms: { p50: pct(ttfts, 50), p90: pct(ttfts, 90), p99: pct(ttfts, 99) },
    itl_ms: { p50: pct(gaps, 50), p90: pct(gaps, 90), p99: pct(gaps, 99) } };
  rows.push(row);
  const f = (x) => (Number.isFinite(x) ? x.toFixed(1) : '-');
  console.log(`clients ${clients}: ${f(row.output_tok_s)} tok/s, ${requests} requests, ${errors} errors` +
    ` | TTFT p50/p90/p99 ${f(row.ttft_ms.p50)}/${f(row.ttft_ms.p90)}/${f(row.ttft_ms.p99)} ms` +
    ` | ITL p50/p90/p99 ${f(row.itl_ms.p50)}/${f(row.itl_ms.p90)}/${f(row.itl_ms.p99)} ms` +
    (firstError ? ` | first error: ${firstError}` : ''));
}
if (args.json) writeFileSync(args.json, JSON.stringify({ url, route, promptTokens, maxTokens, seconds, rows }, null, 1));
