// jitllmd driven by the official OpenAI Node SDK (openai@5.23.2): chat and completions, streamed
// and not, and errors surfacing as the SDK's error classes. Usage: node openai_sdk.mjs BASE_URL
import assert from 'node:assert/strict';
import OpenAI from 'openai';

const baseURL = process.argv[2] + '/v1';
const client = new OpenAI({ baseURL, apiKey: 'unused', maxRetries: 0, timeout: 120_000 });
const model = 'pydoc';
const messages = [{ role: 'user', content: 'What does open() return?' }];

const models = await client.models.list();
assert.ok(models.data.some((m) => m.id === model), 'model listed');

// Chat, not streamed and streamed: the same greedy text.
const chat = await client.chat.completions.create({ model, messages, max_tokens: 16, temperature: 0 });
assert.equal(chat.object, 'chat.completion');
assert.equal(chat.choices[0].message.role, 'assistant');
assert.equal(chat.usage.completion_tokens + chat.usage.prompt_tokens, chat.usage.total_tokens);
const text = chat.choices[0].message.content;
assert.ok(text.length > 0, 'chat text');

const stream = await client.chat.completions.create({
  model, messages, max_tokens: 16, temperature: 0, stream: true,
  stream_options: { include_usage: true },
});
let streamed = '';
let finish = null;
let usage = null;
for await (const chunk of stream) {
  for (const c of chunk.choices) {
    streamed += c.delta?.content ?? '';
    if (c.finish_reason) finish = c.finish_reason;
  }
  if (chunk.usage) usage = chunk.usage;
}
assert.equal(streamed, text, 'streamed chat == non-streamed chat');
assert.ok(finish === 'length' || finish === 'stop', `finish_reason ${finish}`);
assert.equal(usage.completion_tokens, chat.usage.completion_tokens);

// Completions, not streamed and streamed.
const prompt = 'The function returns';
const comp = await client.completions.create({ model, prompt, max_tokens: 16, temperature: 0 });
assert.equal(comp.object, 'text_completion');
const cstream = await client.completions.create({ model, prompt, max_tokens: 16, temperature: 0, stream: true });
let ctext = '';
for await (const chunk of cstream) ctext += chunk.choices[0]?.text ?? '';
assert.equal(ctext, comp.choices[0].text, 'streamed completion == non-streamed completion');

// Errors become the SDK's error types, with OpenAI's fields.
await assert.rejects(
  client.chat.completions.create({ model: 'no-such-model', messages }),
  (e) => e instanceof OpenAI.NotFoundError && e.status === 404 && e.code === 'model_not_found');
await assert.rejects(
  client.chat.completions.create({ model, messages, temperature: 7 }),
  (e) => e instanceof OpenAI.BadRequestError && e.param === 'temperature');
await assert.rejects(
  client.completions.create({ model, prompt: 'x '.repeat(600), max_tokens: 4 }),
  (e) => e instanceof OpenAI.BadRequestError && e.code === 'context_length_exceeded');
const keyed = new OpenAI({ baseURL: process.argv[3] + '/v1', apiKey: 'wrong', maxRetries: 0 });
await assert.rejects(keyed.models.list(), (e) => e instanceof OpenAI.AuthenticationError);
const good = new OpenAI({ baseURL: process.argv[3] + '/v1', apiKey: 's3cret', maxRetries: 0 });
assert.ok((await good.models.list()).data.length === 1);
console.log('openai_sdk: all checks passed');
