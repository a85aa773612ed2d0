// jitllmd's /v1/messages driven by the official Anthropic Node SDK (@anthropic-ai/sdk@1.17.0):
// messages.create and messages.stream give the same greedy message, count_tokens matches the
// prompt the message ran, stop_sequences and max_tokens set stop_reason, a tool round
// (tool_choice any -> a tool_use block whose input meets the schema -> a tool_result back -> an
// answer), a final assistant turn continued, max_tokens past the context, and errors as the
// SDK's error classes with Anthropic's error types.
// Usage: node anthropic_sdk.mjs BASE_URL KEYED_BASE_URL
import assert from 'node:assert/strict';
import Anthropic from '@anthropic-ai/sdk';

const client = new Anthropic({ baseURL: process.argv[2], apiKey: 'unused', maxRetries: 0, timeout: 120_000 });
const model = 'pydoc';
const messages = [{ role: 'user', content: 'What does open() return?' }];
const textOf = (m) => m.content.filter((b) => b.type === 'text').map((b) => b.text).join('');

// Not streamed.
const msg = await client.messages.create({ model, max_tokens: 24, temperature: 0, messages });
assert.equal(msg.type, 'message');
assert.equal(msg.role, 'assistant');
assert.equal(msg.model, model);
assert.match(msg.id, /^msg_[0-9A-Za-z]{24}$/);
assert.ok(textOf(msg).length > 0, 'message text');
assert.ok(['end_turn', 'max_tokens'].includes(msg.stop_reason), `stop_reason ${msg.stop_reason}`);
assert.equal(msg.stop_sequence, null);
assert.ok(msg.usage.input_tokens > 0 && msg.usage.output_tokens > 0 && msg.usage.output_tokens <= 24);

// count_tokens: the prompt the message ran.
const counted = await client.messages.countTokens({ model, messages });
assert.equal(counted.input_tokens, msg.usage.input_tokens, 'count_tokens == usage.input_tokens');

// Streamed: the SDK's events add up to the same message.
const stream = client.messages.stream({ model, max_tokens: 24, temperature: 0, messages });
let streamed = '';
const seen = [];
stream.on('text', (delta) => { streamed += delta; });
stream.on('streamEvent', (e) => seen.push(e.type));
const final = await stream.finalMessage();
assert.equal(streamed, textOf(msg), 'streamed text == non-streamed text');
assert.equal(textOf(final), textOf(msg));
assert.equal(final.stop_reason, msg.stop_reason);
assert.deepEqual(final.usage.output_tokens, msg.usage.output_tokens);
assert.equal(final.usage.input_tokens, msg.usage.input_tokens);
assert.equal(seen[0], 'message_start');
assert.equal(seen.at(-1), 'message_stop');
assert.equal(seen.at(-2), 'message_delta');
assert.ok(seen.includes('content_block_start') && seen.includes('content_block_stop'), seen.join(','));

// max_tokens ends the message with stop_reason max_tokens.
const short = await client.messages.create({ model, max_tokens: 1, temperature: 0, messages });
assert.equal(short.stop_reason, 'max_tokens');
assert.equal(short.usage.output_tokens, 1);

// stop_sequences: a piece of the greedy text stops it right before its first occurrence.
const full = textOf(msg);
let stop = null;
for (let k = Math.floor(full.length / 2); k > 0 && !stop; --k) {
  const s = full.slice(k, k + 3);
  if (s.trim().length === 3 && full.indexOf(s) > 0) stop = s;
}
assert.ok(stop, `no stop sequence found in ${JSON.stringify(full)}`);
const stopped = await client.messages.create({
  model, max_tokens: 24, temperature: 0, messages, stop_sequences: ['@@never@@', stop],
});
assert.equal(stopped.stop_reason, 'stop_sequence');
assert.equal(stopped.stop_sequence, stop);
assert.equal(textOf(stopped), full.slice(0, full.indexOf(stop)));

// A tool round: tool_choice any makes a call; its input meets the schema.
const tools = [{
  name: 'get_weather', description: 'The weather in a city now',
  input_schema: {
    type: 'object', additionalProperties: false, required: ['city', 'unit'],
    properties: { city: { type: 'string', maxLength: 12 }, unit: { type: 'string', enum: ['celsius', 'fahrenheit'] } },
  },
}];
const ask = [{ role: 'user', content: 'What is the weather in Oslo?' }];
const checkCall = (m, where) => {
  assert.equal(m.stop_reason, 'tool_use', where);
  const uses = m.content.filter((b) => b.type === 'tool_use');
  assert.equal(uses.length, 1, `${where}: one call (disable_parallel_tool_use)`);
  const [use] = uses;
  assert.match(use.id, /^toolu_[0-9A-Za-z]+$/, where);
  assert.equal(use.name, 'get_weather', where);
  assert.deepEqual(Object.keys(use.input).sort(), ['city', 'unit'], where);
  assert.ok(typeof use.input.city === 'string' && use.input.city.length <= 12, where);
  assert.ok(['celsius', 'fahrenheit'].includes(use.input.unit), where);
  return use;
};
const toolChoice = { type: 'any', disable_parallel_tool_use: true };
// (A call is ~90 tokens of this model's small vocabulary.)
const called = await client.messages.create({
  model, max_tokens: 150, temperature: 0, tools, tool_choice: toolChoice, messages: ask,
});
const use = checkCall(called, 'create');
let inputJson = '';
const callStream = client.messages.stream({
  model, max_tokens: 150, temperature: 0, tools, tool_choice: toolChoice, messages: ask,
});
callStream.on('inputJson', (delta) => { inputJson += delta; });
const streamedUse = checkCall(await callStream.finalMessage(), 'stream');
assert.deepEqual(streamedUse.input, use.input, 'streamed call == non-streamed call (greedy)');
assert.deepEqual(JSON.parse(inputJson), use.input, 'input_json_delta adds up to the input');
// tool_choice tool names the function; temperature 1 still meets the schema.
checkCall(await client.messages.create({
  model, max_tokens: 150, temperature: 1, tools, messages: ask,
  tool_choice: { type: 'tool', name: 'get_weather', disable_parallel_tool_use: true },
}), 'named');
// The tools are part of the prompt.
assert.ok((await client.messages.countTokens({ model, tools, messages: ask })).input_tokens >
          (await client.messages.countTokens({ model, messages: ask })).input_tokens);
// The result goes back; with tool_choice none the model answers in text.
const answered = await client.messages.create({
  model, max_tokens: 16, temperature: 0, tools, tool_choice: { type: 'none' },
  messages: [...ask, { role: 'assistant', content: called.content },
             { role: 'user', content: [{ type: 'tool_result', tool_use_id: use.id, content: '-3 C, snow' }] }],
});
assert.ok(['end_turn', 'max_tokens'].includes(answered.stop_reason), answered.stop_reason);
assert.ok(answered.content.length > 0 && answered.content.every((b) => b.type === 'text'));
// A result for a call that was never made is refused.
await assert.rejects(
  client.messages.create({
    model, max_tokens: 16, tools,
    messages: [...ask, { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_nope', content: 'x' }] }],
  }),
  (e) => e instanceof Anthropic.BadRequestError && /tool_use_id/.test(e.message));

// A final assistant turn is continued: it is part of the prompt, not of the answer.
const prefill = [...messages, { role: 'assistant', content: 'It returns' }];
assert.ok((await client.messages.countTokens({ model, messages: prefill })).input_tokens > counted.input_tokens);
const continued = await client.messages.create({ model, max_tokens: 8, temperature: 0, messages: prefill });
assert.ok(!textOf(continued).startsWith('It returns'), textOf(continued));
assert.equal(continued.usage.input_tokens, (await client.messages.countTokens({ model, messages: prefill })).input_tokens);

// Errors: the SDK's classes, Anthropic's error types, the field named.
await assert.rejects(
  client.messages.create({ model, messages }),  // no max_tokens
  (e) => e instanceof Anthropic.BadRequestError && e.status === 400 && e.type === 'invalid_request_error' &&
         e.error.type === 'error' && /max_tokens/.test(e.error.error.message));
await assert.rejects(
  client.messages.create({ model, max_tokens: 8, messages: [{ role: 'user', content: [{ type: 'image', source: { type: 'base64', media_type: 'image/png', data: 'iVBORw0KGgo=' } }] }] }),
  (e) => e instanceof Anthropic.BadRequestError && /messages\[0\]\.content\[0\]\.type/.test(e.message));
await assert.rejects(
  client.messages.create({ model, max_tokens: 8, messages, thinking: { type: 'enabled', budget_tokens: 1024 } }),
  (e) => e instanceof Anthropic.BadRequestError && /thinking/.test(e.message));
await assert.rejects(
  client.messages.create({ model, max_tokens: 8, messages, temperature: 1.5 }),
  (e) => e instanceof Anthropic.BadRequestError && /temperature/.test(e.message));
await assert.rejects(
  client.messages.create({ model: 'no-such-model', max_tokens: 8, messages }),
  (e) => e instanceof Anthropic.NotFoundError && e.type === 'not_found_error');
await assert.rejects(
  client.messages.create({ model, max_tokens: 8, messages: [{ role: 'user', content: 'x '.repeat(2000) }] }),
  (e) => e instanceof Anthropic.BadRequestError && /context length/.test(e.message));

// max_tokens beyond the context's room: the output runs to the context's end and says so.
const context = (await (await fetch(`${process.argv[2]}/v1/models`)).json()).data[0].context_length;
const longAsk = (n) => [{ role: 'user', content: 'open '.repeat(n) }];
const tokens = async (n) => (await client.messages.countTokens({ model, messages: longAsk(n) })).input_tokens;
let words = 0;  // the most words whose prompt leaves the context 5 tokens or a few more
for (let step = 512; step >= 1; step /= 2) if (await tokens(words + step) < context - 4) words += step;
const filled = await client.messages.create({ model, max_tokens: 4096, temperature: 0, messages: longAsk(words) });
assert.equal(filled.stop_reason, 'model_context_window_exceeded', JSON.stringify(filled));
assert.equal(filled.usage.input_tokens + filled.usage.output_tokens, context);

// The key: x-api-key (what the SDK sends) is accepted; a wrong one is an AuthenticationError.
const wrong = new Anthropic({ baseURL: process.argv[3], apiKey: 'wrong', maxRetries: 0 });
await assert.rejects(wrong.messages.create({ model, max_tokens: 4, messages }),
  (e) => e instanceof Anthropic.AuthenticationError && e.type === 'authentication_error');
const right = new Anthropic({ baseURL: process.argv[3], apiKey: 's3cret', maxRetries: 0 });
assert.equal((await right.messages.create({ model, max_tokens: 4, messages })).type, 'message');
console.log('anthropic_sdk: all checks passed');
