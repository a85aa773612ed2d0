// /v1/responses driven by the official OpenAI Node SDK (openai@5.23.2, zod@3.25.76) against
// jitllmd on the bundled demo model: whole and streamed responses (event order, sequence
// numbers, the streamed text == the whole response's), the answers equal to the chat route's
// for the same conversation (one path), max_output_tokens -> incomplete, a function-tool round
// trip, text.format json_schema through parse(), and the refusals as the SDK's error classes.
// Usage: node responses_sdk.mjs BASE_URL
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { zodTextFormat } from 'openai/helpers/zod';
import { z } from 'zod';

const client = new OpenAI({ baseURL: process.argv[2] + '/v1', apiKey: 'unused', maxRetries: 0, timeout: 60_000 });
const [served] = (await client.models.list()).data;
const model = served.id;

function checkUsage(r) {
  assert.ok(r.usage.input_tokens > 0, 'input tokens');
  assert.equal(r.usage.input_tokens + r.usage.output_tokens, r.usage.total_tokens);
  assert.equal(typeof r.usage.input_tokens_details.cached_tokens, 'number');
  assert.equal(r.usage.output_tokens_details.reasoning_tokens, 0);
}

// A string input, greedy: the chat route's answer to the same user message.
const question = 'What does the open function return?';
const whole = await client.responses.create({ model, input: question, max_output_tokens: 48, temperature: 0 });
assert.equal(whole.object, 'response');
assert.match(whole.id, /^resp_/);
assert.ok(['completed', 'incomplete'].includes(whole.status), whole.status);
assert.equal(whole.error, null);
assert.equal(whole.output.length, 1);
const [message] = whole.output;
assert.equal(message.type, 'message');
assert.equal(message.role, 'assistant');
assert.match(message.id, /^msg_/);
assert.equal(message.content[0].type, 'output_text');
assert.equal(whole.output_text, message.content[0].text);
assert.ok(whole.output_text.length > 0, 'some text');
checkUsage(whole);
assert.ok(whole.usage.output_tokens <= 48);
// The settings echoed back.
assert.equal(whole.max_output_tokens, 48);
assert.equal(whole.temperature, 0);
assert.equal(whole.store, false);
assert.deepEqual(whole.tools, []);
assert.equal(whole.tool_choice, 'auto');
assert.deepEqual(whole.text.format, { type: 'text' });
const chat = await client.chat.completions.create({
  model, messages: [{ role: 'user', content: question }], max_tokens: 48, temperature: 0,
});
assert.equal(whole.output_text, chat.choices[0].message.content, 'responses == chat');
assert.equal(whole.usage.output_tokens, chat.usage.completion_tokens);
assert.equal(whole.status, chat.choices[0].finish_reason === 'length' ? 'incomplete' : 'completed');

// max_output_tokens reached: incomplete, with its reason.
const cut = await client.responses.create({ model, input: question, max_output_tokens: 3, ignore_eos: true });
assert.equal(cut.status, 'incomplete');
assert.deepEqual(cut.incomplete_details, { reason: 'max_output_tokens' });
assert.equal(cut.usage.output_tokens, 3);
assert.equal(cut.output[0].status, 'incomplete');

// Items and instructions: the same conversation on the chat route gives the same answer.
const items = [
  { role: 'user', content: 'Hello.' },
  { type: 'message', role: 'assistant', content: [{ type: 'output_text', text: 'Hello! How can I help?' }] },
  { role: 'user', content: [{ type: 'input_text', text: 'What is a list in Python?' }] },
];
const conv = await client.responses.create({
  model, instructions: 'Answer in one sentence.', input: items, max_output_tokens: 40, temperature: 0,
});
assert.equal(conv.instructions, 'Answer in one sentence.');
const convChat = await client.chat.completions.create({
  model, max_tokens: 40, temperature: 0, messages: [
    { role: 'system', content: 'Answer in one sentence.' }, { role: 'user', content: 'Hello.' },
    { role: 'assistant', content: 'Hello! How can I help?' }, { role: 'user', content: 'What is a list in Python?' }],
});
assert.equal(conv.output_text, convChat.choices[0].message.content, 'items == chat messages');
assert.equal(conv.usage.input_tokens, convChat.usage.prompt_tokens);

// Log probabilities on request: the chat route's for the same answer, streamed with the deltas.
const lpBody = { model, input: question, max_output_tokens: 8, temperature: 0, top_logprobs: 2,
  include: ['message.output_text.logprobs'] };
const withLp = await client.responses.create(lpBody);
const lps = withLp.output[0].content[0].logprobs;
const chatLp = await client.chat.completions.create({
  model, messages: [{ role: 'user', content: question }], max_tokens: 8, temperature: 0, logprobs: true, top_logprobs: 2,
});
assert.ok(lps.length > 0);
assert.deepEqual(lps, chatLp.choices[0].logprobs.content);
assert.equal(lps.map((t) => t.token).join(''), withLp.output_text);
lps.forEach((t) => assert.equal(t.top_logprobs.length, 2));
const lpStream = await client.responses.create({ ...lpBody, stream: true });
const streamedLps = [];
for await (const e of lpStream) if (e.type === 'response.output_text.delta') streamedLps.push(...e.logprobs);
assert.deepEqual(streamedLps, lps);

// Streamed with the SDK's helper: the events in order, numbered, joined deltas == the text.
function checkEvents(events, final) {
  assert.equal(events[0].type, 'response.created');
  assert.equal(events[0].response.status, 'in_progress');
  assert.equal(events[1].type, 'response.in_progress');
  assert.equal(events.at(-1).type, `response.${final.status}`);
  events.forEach((e, i) => assert.equal(e.sequence_number, i, `sequence_number of ${e.type}`));
  const order = events.map((e) => e.type).filter((t) => !t.endsWith('.delta'));
  return order;
}
const stream = client.responses.stream({ model, input: question, max_output_tokens: 48, temperature: 0 });
const events = [];
let deltas = '';
for await (const e of stream) {
  events.push(e);
  if (e.type === 'response.output_text.delta') deltas += e.delta;
}
const streamed = await stream.finalResponse();
assert.deepEqual(checkEvents(events, whole).slice(2), [
  'response.output_item.added', 'response.content_part.added', 'response.output_text.done',
  'response.content_part.done', 'response.output_item.done', `response.${whole.status}`]);
assert.equal(deltas, whole.output_text, 'streamed == whole');
// (this SDK's stream helper sets output_text only when it parses a text.format)
assert.equal(streamed.output[0].content[0].text, deltas);
const last = events.at(-1).response;
assert.equal(last.output[0].content[0].text, deltas);
assert.equal(last.usage.input_tokens, whole.usage.input_tokens);  // cached_tokens may differ
assert.equal(last.usage.output_tokens, whole.usage.output_tokens);

// create({stream: true}): the same events; a cut stream ends with response.incomplete.
const raw = await client.responses.create({ model, input: question, max_output_tokens: 3, ignore_eos: true, stream: true });
const rawEvents = [];
for await (const e of raw) rawEvents.push(e);
assert.equal(rawEvents.at(-1).type, 'response.incomplete');
assert.equal(rawEvents.at(-1).response.incomplete_details.reason, 'max_output_tokens');
assert.equal(rawEvents.at(-1).response.usage.output_tokens, 3);

// A function tool: required -> a call whose arguments hold to the schema; its output goes back
// and the model answers in text.
const tools = [{
  type: 'function', name: 'add', description: 'Add two integers.', strict: true,
  parameters: {
    type: 'object', additionalProperties: false, required: ['a', 'b'],
    properties: { a: { type: 'integer', minimum: -99, maximum: 99 }, b: { type: 'integer', minimum: -99, maximum: 99 } },
  },
}];
const ask = [{ role: 'user', content: 'What is 2 + 3?' }];
const called = await client.responses.create({
  model, input: ask, tools, tool_choice: 'required', parallel_tool_calls: false, temperature: 1, seed: 5,
  max_output_tokens: 100,
});
assert.equal(called.status, 'completed');
const calls = called.output.filter((o) => o.type === 'function_call');
assert.equal(calls.length, 1, JSON.stringify(called.output));
const [call] = calls;
assert.equal(call.name, 'add');
assert.match(call.call_id, /^call_/);
assert.match(call.id, /^fc_/);
assert.equal(call.status, 'completed');
const args = JSON.parse(call.arguments);
assert.deepEqual(Object.keys(args).sort(), ['a', 'b']);
for (const v of Object.values(args)) assert.ok(Number.isInteger(v) && v >= -99 && v <= 99, call.arguments);
assert.equal(called.tools[0].name, 'add');
assert.equal(called.tool_choice, 'required');
const answered = await client.responses.create({
  model, tools, tool_choice: 'none', max_output_tokens: 40, temperature: 0,
  input: [...ask, ...called.output, { type: 'function_call_output', call_id: call.call_id, output: String(args.a + args.b) }],
});
assert.ok(answered.output.every((o) => o.type === 'message'), JSON.stringify(answered.output));
const unanswered = await client.responses.create({ model, tools, tool_choice: 'none', max_output_tokens: 1, input: ask });
assert.ok(answered.usage.input_tokens > unanswered.usage.input_tokens + 10, 'the call and its output are in the prompt');

// The call streamed: its item and argument events.
const callStream = client.responses.stream({
  model, input: ask, tools, tool_choice: { type: 'function', name: 'add' }, temperature: 1, seed: 5, max_output_tokens: 100,
});
const callEvents = [];
for await (const e of callStream) callEvents.push(e);
const callFinal = await callStream.finalResponse();
const types = callEvents.map((e) => e.type);
assert.ok(types.includes('response.function_call_arguments.delta'), types.join());
const done = callEvents.find((e) => e.type === 'response.function_call_arguments.done');
assert.equal(done.name, 'add');
assert.deepEqual(Object.keys(JSON.parse(done.arguments)).sort(), ['a', 'b']);
assert.equal(callFinal.output.find((o) => o.type === 'function_call').arguments, done.arguments);

// text.format json_schema: parse() with zod, and a plain schema through create().
const Person = z.object({ name: z.string().max(16), age: z.number().int().min(0).max(120) });
const person = await client.responses.parse({
  model, input: 'A person as JSON.', temperature: 1, seed: 3, max_output_tokens: 200,
  text: { format: zodTextFormat(Person, 'person') },
});
assert.equal(person.status, 'completed');
assert.deepEqual(Person.parse(person.output_parsed), person.output_parsed);
const colour = await client.responses.create({
  model, input: 'Colour?', temperature: 1, seed: 4, max_output_tokens: 50,
  text: { format: { type: 'json_schema', name: 'c', strict: true, schema: {
    type: 'object', additionalProperties: false, required: ['colour'],
    properties: { colour: { enum: ['red', 'blue'] } } } } },
});
assert.ok(['red', 'blue'].includes(JSON.parse(colour.output_text).colour), colour.output_text);
assert.equal(colour.text.format.name, 'c');

// truncation: a conversation longer than the context is refused as it is; with "auto" it loses
// the fewest oldest turns that make it fit (the chat route's answer from that turn on, and one
// turn more would not fit).
const para = (i) => `Turn ${i}: ` + 'the module provides functions for working with files and directories. '.repeat(5);
const long = [];
for (let i = 0; i < 6; i++) long.push({ role: 'user', content: para(i) }, { role: 'assistant', content: para(i) });
long.push({ role: 'user', content: 'What is a file?' });
await assert.rejects(client.responses.create({ model, input: long, max_output_tokens: 16 }),
  (e) => e instanceof OpenAI.BadRequestError && e.code === 'context_length_exceeded' && e.param === 'input');
const kept = await client.responses.create({ model, input: long, max_output_tokens: 16, temperature: 0, truncation: 'auto' });
assert.equal(kept.truncation, 'auto');
assert.ok(kept.usage.input_tokens + 16 <= served.context_length, JSON.stringify(kept.usage));
const fromTurn = async (k) => client.chat.completions.create({
  model, messages: long.slice(2 * k), max_tokens: 16, temperature: 0 }).catch((e) => {
  assert.ok(e instanceof OpenAI.BadRequestError, String(e));
  return null;
});
let turn = 1;
while (turn < 6 && (await fromTurn(turn))?.usage.prompt_tokens !== kept.usage.input_tokens) turn++;
assert.ok(turn < 6, 'the kept conversation starts at a user turn');
console.log(`truncation: ${turn} of 6 turns dropped, ${kept.usage.input_tokens} input tokens`);
assert.equal((await fromTurn(turn)).choices[0].message.content, kept.output_text);
assert.equal(await fromTurn(turn - 1), null, 'one turn more would not fit');

// Refusals: what is not honoured is a 400 naming the field; stored responses do not exist.
async function refused(body, param) {
  await assert.rejects(client.responses.create({ model, input: 'x', ...body }), (e) => {
    assert.ok(e instanceof OpenAI.BadRequestError, String(e));
    assert.equal(e.status, 400);
    assert.equal(e.param, param, e.message);
    return true;
  });
}
await refused({ previous_response_id: 'resp_123' }, 'previous_response_id');
await refused({ store: true }, 'store');
await refused({ background: true }, 'background');
// The demo's template reads no reasoning_effort; there are no summaries.
await refused({ reasoning: { effort: 'low' } }, 'reasoning.effort');
await refused({ reasoning: { summary: 'auto' } }, 'reasoning.summary');
await refused({ tools: [{ type: 'web_search' }] }, 'tools[0].type');
await refused({ input: [{ role: 'user', content: [{ type: 'input_image', image_url: 'https://x/y.png' }] }] },
  'input[0].content[0].type');
await refused({ max_output_tokens: 100000 }, 'max_output_tokens');
await refused({ text: { format: { type: 'json_schema', name: 'u', schema: { type: 'string', format: 'uri' } } } },
  'text.format.schema');
await assert.rejects(client.responses.stream({ model, input: 'x', previous_response_id: 'resp_1' }).finalResponse(),
  (e) => e instanceof OpenAI.BadRequestError && e.param === 'previous_response_id');
await assert.rejects(client.responses.retrieve(whole.id), (e) => e instanceof OpenAI.NotFoundError);
await assert.rejects(client.responses.delete(whole.id), (e) => e instanceof OpenAI.NotFoundError);

console.log('responses_sdk.mjs: ok');
