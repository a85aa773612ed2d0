// jitllmd driven by the official OpenAI Node SDK (openai@5.23.2, zod@3.25.76): chat and
// completions, streamed and not, structured output through parse() (zod and plain JSON Schema),
// tool calls through parse() and runTools() (streamed and not), and errors surfacing as the
// SDK's error classes. Usage: node openai_sdk.mjs BASE_URL KEYED_BASE_URL
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { zodFunction, zodResponseFormat } from 'openai/helpers/zod';
import { z } from 'zod';

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

// Structured output: parse() with a zod schema and with a plain JSON Schema.
const Person = z.object({ name: z.string().max(16), age: z.number().int().min(0).max(120) });
const parsed = await client.chat.completions.parse({
  model, messages: [{ role: 'user', content: 'A person as JSON.' }], temperature: 1, seed: 3,
  max_tokens: 200, response_format: zodResponseFormat(Person, 'person'),
});
assert.equal(parsed.choices[0].finish_reason, 'stop');
assert.deepEqual(Person.parse(parsed.choices[0].message.parsed), parsed.choices[0].message.parsed);
const plain = await client.chat.completions.parse({
  model, messages: [{ role: 'user', content: 'Colour?' }], temperature: 1, seed: 4, max_tokens: 50,
  response_format: { type: 'json_schema', json_schema: { name: 'c', schema: { enum: ['red', 'blue'] } } },
});
assert.ok(['red', 'blue'].includes(plain.choices[0].message.parsed), plain.choices[0].message.content);

// Tool calls: parse() fills parsed_arguments from a zod function.
const Add = z.object({ a: z.number().int().min(-99).max(99), b: z.number().int().min(-99).max(99) });
const ask = [{ role: 'user', content: 'What is 2 + 3?' }];
const toolParsed = await client.chat.completions.parse({
  model, messages: ask, temperature: 1, seed: 5, max_tokens: 100, tool_choice: 'required',
  parallel_tool_calls: false, tools: [zodFunction({ name: 'add', parameters: Add })],
});
assert.equal(toolParsed.choices[0].finish_reason, 'tool_calls');
const call = toolParsed.choices[0].message.tool_calls[0];
assert.equal(call.function.name, 'add');
assert.deepEqual(Add.parse(call.function.parsed_arguments), call.function.parsed_arguments);

// runTools(): the SDK calls our function with the parsed arguments, sends the result back (a
// tool message through the template) and asks again; streamed, the calls come from
// delta.tool_calls.
for (const stream of [false, true]) {
  const seen = [];
  const runner = client.chat.completions.runTools({
    model, messages: ask, temperature: 1, seed: 6, max_tokens: 75, stream,  // a call is ~60 tokens; the context 512
    parallel_tool_calls: false, tool_choice: 'required',
    tools: [zodFunction({ name: 'add', parameters: Add, function: (args) => { seen.push(args); return args.a + args.b; } })],
  }, { maxChatCompletions: 2 });
  await runner.done();
  assert.equal(seen.length, 2, `runTools (stream ${stream}) called add twice`);
  for (const args of seen) assert.deepEqual(Add.parse(args), args);
  const roles = runner.messages.map((m) => m.role);
  assert.deepEqual(roles, ['user', 'assistant', 'tool', 'assistant', 'tool'], roles.join(','));
  assert.equal(runner.messages[2].content, String(seen[0].a + seen[0].b));
}
// A named function: runTools() calls it once and stops.
const once = client.chat.completions.runTools({
  model, messages: ask, temperature: 1, seed: 7, max_tokens: 100,
  tool_choice: { type: 'function', function: { name: 'add' } },
  tools: [{ type: 'function', function: { name: 'add', parse: JSON.parse, function: ({ a, b }) => a + b,
                                          parameters: { type: 'object', properties: { a: { type: 'integer' }, b: { type: 'integer' } },
                                                        required: ['a', 'b'] } } }],
});
const result = await once.finalFunctionToolCallResult();
assert.ok(Number.isInteger(Number(result)), `named runTools result ${result}`);

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
