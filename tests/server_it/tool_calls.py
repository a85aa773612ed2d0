#!/usr/bin/env python3
"""Tool calling against a running jitllmd, whatever syntax its chat template writes calls in:
tool_choice required / named / parallel_tool_calls false hold every call to the tools' schemas
(python3-jsonschema validates the arguments) at temperature 1, streamed calls add up the same
way, a call and its result go back through the template, auto and none answer, and what is not
honoured is a 400 naming the parameter. With --unsupported: the template's syntax is not
parsed, so tools are refused unless tool_choice is none. With --no-thinking: every request asks
the template not to think (chat_template_kwargs enable_thinking false), for templates that would
open a thinking the 10M model fills until max_tokens (DeepSeek V3.1's). --extra JSON: fields
added to every request (a logit_bias toward marker tokens the model would spell byte by byte).
Usage: tool_calls.py URL [--unsupported] [--no-thinking] [--extra JSON] [--record FILE]
(schema_check.py)"""
import json
import sys
import urllib.error
import urllib.request

import schema_check

URL = sys.argv[1]
UNSUPPORTED = "--unsupported" in sys.argv
NO_THINKING = {"chat_template_kwargs": {"enable_thinking": False}} if "--no-thinking" in sys.argv else {}
if "--extra" in sys.argv:
    NO_THINKING.update(json.loads(sys.argv[sys.argv.index("--extra") + 1]))

TOOLS = [
    {"type": "function", "function": {
        "name": "get_weather", "description": "The weather in a city now",
        "parameters": {"type": "object", "properties": {
            "city": {"type": "string", "maxLength": 20},
            "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
            "required": ["city", "unit"], "additionalProperties": False}}},
    {"type": "function", "function": {
        "name": "add", "description": "Adds two integers",
        "parameters": {"type": "object", "properties": {
            "a": {"type": "integer", "minimum": -1000, "maximum": 1000},
            "b": {"type": "integer", "minimum": -1000, "maximum": 1000}}, "required": ["a", "b"]}}},
    {"type": "function", "function": {"name": "now", "description": "The time"}},
]
SCHEMA = {t["function"]["name"]: t["function"].get("parameters", {"type": "object", "properties": {},
                                                                   "additionalProperties": False})
          for t in TOOLS}
# A system message of our own: some templates (Mistral Small 3.2) default to a long one.
ASK = [{"role": "system", "content": "Use the tools."},
       {"role": "user", "content": "What is the weather in Oslo, and what is 2 + 3?"}]


def post(body, expect=200):
    req = urllib.request.Request(URL + "/v1/chat/completions", json.dumps(body).encode(),
                                 {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=300) as r:
            status, text = r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        status, text = e.code, e.read().decode()
    if status != expect:
        sys.exit(f"FAIL: answered {status} (expected {expect}) to {json.dumps(body)[:300]}: {text[:400]}")
    return json.loads(text)


def check_calls(calls, where, names=None):
    assert calls, f"{where}: no tool calls"
    for c in calls:
        assert c["type"] == "function", (where, c)
        assert isinstance(c["id"], str) and c["id"], (where, c)
        name = c["function"]["name"]
        assert name in SCHEMA and (names is None or name in names), (where, c)
        args = json.loads(c["function"]["arguments"])
        schema_check.validate(args, SCHEMA[name])
    assert len({c["id"] for c in calls}) == len(calls), f"{where}: ids repeat"


def room(messages):
    """Tokens left for the answer: the bundled model's context is 512 tokens, and templates
    describe the tools at length."""
    req = urllib.request.Request(URL + "/v1/chat/completions", json.dumps(
        {"messages": messages, "tools": TOOLS, "max_tokens": 1, **NO_THINKING}).encode(), {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=300) as r:
            return min(120, 512 - json.loads(r.read())["usage"]["prompt_tokens"] - 1)
    except urllib.error.HTTPError as e:
        assert e.code == 400 and b"context_length_exceeded" in e.read(), e.code
        return 0


def request(extra):
    return {"messages": ASK, "tools": TOOLS, "temperature": 1.0, "max_tokens": MAX_TOKENS,
            **NO_THINKING, **extra}


MAX_TOKENS = 8


if UNSUPPORTED:
    r = post(request({"tool_choice": "required"}), 400)
    assert r["error"]["param"] == "tools", r
    post(request({"tool_choice": "auto"}), 400)
    r = post(request({"tool_choice": "none", "max_tokens": 8}))
    assert "tool_calls" not in r["choices"][0]["message"], r
    print("tool_calls (unsupported syntax): ok")
    sys.exit(0)

# As many of the tools as leave room for a call (templates with long preambles get fewer).
while (MAX_TOKENS := room(ASK)) < 60 and len(TOOLS) > 1:
    TOOLS = TOOLS[:-1]
assert MAX_TOKENS >= 60, f"only {MAX_TOKENS} tokens left for a call"
print(f"{len(TOOLS)} tools, {MAX_TOKENS} tokens for the answer")

# required: calls, each valid; named: that one function, once; parallel_tool_calls false: one
# call. The bundled model is small: max_tokens may cut a call short (its text is then content,
# finish_reason "length"); most runs must still call.
def calls_of(body, where, names=None, single=False):
    choice = post(request(body))["choices"][0]
    calls = choice["message"].get("tool_calls")
    if choice["finish_reason"] == "length" and not single:
        if calls:
            check_calls(calls, where, names)
        return calls
    if choice["finish_reason"] == "length":
        assert not calls and choice["message"]["content"], (where, choice)
        return None
    assert choice["finish_reason"] == "tool_calls", (where, choice)
    assert choice["message"]["content"] is None, (where, choice)
    check_calls(calls, where, names)
    if single:
        assert len(calls) == 1, (where, calls)
    return calls


runs = [calls_of({"tool_choice": "required", "seed": seed}, f"required seed {seed}") for seed in range(8)]
first_calls = next(c for c in runs if c)[:1]
assert sum(bool(c) for c in runs) >= 6, runs
NAMED = TOOLS[-1]["function"]["name"]
runs = [calls_of({"tool_choice": {"type": "function", "function": {"name": NAMED}}, "seed": seed},
                 f"named seed {seed}", {NAMED}, True) for seed in range(4)]
assert sum(bool(c) for c in runs) >= 3, runs
runs = [calls_of({"tool_choice": "required", "parallel_tool_calls": False, "seed": 100 + seed},
                 f"parallel false seed {seed}", None, True) for seed in range(4)]
assert sum(bool(c) for c in runs) >= 3, runs

# n = 2: each choice has its own calls.
r = post(request({"tool_choice": "required", "parallel_tool_calls": False, "n": 2, "seed": 7}))
for c in r["choices"]:
    check_calls(c["message"]["tool_calls"], f"choice {c['index']}")

# Streamed: delta.tool_calls chunks add up to valid calls.
req = urllib.request.Request(URL + "/v1/chat/completions", json.dumps(
    request({"tool_choice": "required", "parallel_tool_calls": False, "seed": 3, "stream": True})).encode(),
    {"Content-Type": "application/json"})
calls, content, reason = {}, "", None
with urllib.request.urlopen(req, timeout=300) as resp:
    for line in resp:
        line = line.decode().strip()
        if not line.startswith("data: ") or line == "data: [DONE]":
            continue
        for ch in json.loads(line[6:])["choices"]:
            delta = ch.get("delta", {})
            content += delta.get("content") or ""
            for tc in delta.get("tool_calls") or []:
                c = calls.setdefault(tc["index"], {"id": "", "type": "function",
                                                   "function": {"name": "", "arguments": ""}})
                c["id"] += tc.get("id") or ""
                c["function"]["name"] += tc.get("function", {}).get("name") or ""
                c["function"]["arguments"] += tc.get("function", {}).get("arguments") or ""
            reason = ch.get("finish_reason") or reason
assert reason == "tool_calls", reason
assert content == "", content
check_calls([calls[i] for i in sorted(calls)], "streamed")
assert sorted(calls) == list(range(len(calls))), calls

# The call and its result go back through the template; auto answers either way.
history = ASK + [{"role": "assistant", "content": None, "tool_calls": first_calls}] + [
    {"role": "tool", "tool_call_id": c["id"], "content": json.dumps({"result": "ok"})} for c in first_calls]
# Only the function called is offered again, so the conversation fits the context.
TOOLS = [t for t in TOOLS if t["function"]["name"] == first_calls[0]["function"]["name"]]
for seed in range(3):
    r = post({"messages": history, "tools": TOOLS, "temperature": 1.0, "seed": seed,
              "max_tokens": min(60, room(history))})
    choice = r["choices"][0]
    assert choice["finish_reason"] in ("stop", "length", "tool_calls"), choice
    if choice["message"].get("tool_calls"):
        check_calls(choice["message"]["tool_calls"], "auto")
        assert choice["finish_reason"] == "tool_calls", choice
r = post({"messages": history, "tools": TOOLS, "tool_choice": "none", "max_tokens": 4})
assert "tool_calls" not in r["choices"][0]["message"], r

# Refusals.
for extra, param in [
    ({"tools": [{"type": "function", "function": {"name": "bad name"}}]}, "tools[0].function.name"),
    ({"tools": [{"type": "function", "function": {"name": "f", "parameters": {
        "type": "object", "properties": {"x": {"type": "string", "format": "ipv6"}}}}}]},
     "tools[0].function.parameters"),
    ({"tool_choice": {"type": "function", "function": {"name": "missing"}}}, "tool_choice"),
    ({"tool_choice": "sometimes"}, "tool_choice"),
    ({"parallel_tool_calls": 1}, "parallel_tool_calls"),
    ({"response_format": {"type": "json_object"}}, "tools"),
]:
    r = post({**request({}), **extra}, 400)
    assert r["error"]["param"] == param, (extra, r)
print("tool_calls: ok")
