// /v1/embeddings driven by the official OpenAI Node SDK: one text, several, token ids, base64
// (the SDK's default wire format, decoded by it) equal to float, the vectors unit length and
// equal to `jitllm embed`'s (passed in as JSON), usage counted, and the SDK's errors for a bad
// request. Usage: node embeddings.mjs BASE_URL EXPECTED_JSON
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { readFileSync } from 'node:fs';

const client = new OpenAI({ baseURL: process.argv[2] + '/v1', apiKey: 'unused', maxRetries: 0 });
const expected = JSON.parse(readFileSync(process.argv[3], 'utf8')).data.map((d) => d.embedding);
const model = 'bert';
const texts = ['The cat sat on the mat.', 'A fast engine makes tokens from the prompt.'];

const close = (a, b, what) => {
  assert.equal(a.length, b.length, what);
  for (let i = 0; i < a.length; ++i) assert.ok(Math.abs(a[i] - b[i]) < 1e-5, `${what}: ${a[i]} vs ${b[i]}`);
};

// Several texts, the SDK's default (base64 on the wire, decoded to floats by the SDK).
const many = await client.embeddings.create({ model, input: texts });
assert.equal(many.object, 'list');
assert.equal(many.data.length, 2);
many.data.forEach((d, i) => {
  assert.equal(d.object, 'embedding');
  assert.equal(d.index, i);
  const norm = Math.sqrt(d.embedding.reduce((s, x) => s + x * x, 0));
  assert.ok(Math.abs(norm - 1) < 1e-5, `unit length, got ${norm}`);
  close(d.embedding, expected[i], `text ${i} against jitllm embed`);
});
assert.ok(many.usage.prompt_tokens > 10);
assert.equal(many.usage.total_tokens, many.usage.prompt_tokens);

// Floats on the wire: the same numbers.
const floats = await client.embeddings.create({ model, input: texts[0], encoding_format: 'float' });
close(floats.data[0].embedding, many.data[0].embedding, 'float == base64');

// Token ids: the same as the text they spell.
const ids = JSON.parse(readFileSync(process.argv[3], 'utf8')).ids0;
const byIds = await client.embeddings.create({ model, input: [ids], encoding_format: 'float' });
close(byIds.data[0].embedding, many.data[0].embedding, 'ids == text');

// Errors as the SDK's classes.
await assert.rejects(client.embeddings.create({ model, input: '' }), OpenAI.BadRequestError);
await assert.rejects(client.embeddings.create({ model, input: texts, dimensions: 7 }), OpenAI.BadRequestError);
await assert.rejects(client.embeddings.create({ model: 'nope', input: texts }), OpenAI.NotFoundError);
console.log('embeddings: ok');
