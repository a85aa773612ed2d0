#!/usr/bin/env python3
"""Structured output against a running jitllmd: 50 JSON Schemas (JSON Schema test-suite shapes
and function-calling schemas), each answered at temperature 1 with a seed; every completion
must end by itself ("stop"), parse, and validate under python3-jsonschema (Draft 2020-12, with
its format checker). Then json_object mode, the grammar and json_schema fields on
/v1/completions, a streamed constrained chat, and the refusals (400 naming the parameter).
Usage: structured_output.py URL [--record FILE] (schema_check.py: without python3-jsonschema)"""
import json
import sys
import urllib.error
import urllib.request

import schema_check

URL = sys.argv[1]

S = {"type": "string", "maxLength": 24}
SCHEMAS = [
    {"type": "string"},
    {"type": "integer"},
    {"type": "number"},
    {"type": "boolean"},
    {"type": "null"},
    {"type": ["integer", "string"]},
    {"enum": ["red", "green", "blue"]},
    {"enum": [1, "two", None, True]},
    {"const": {"fixed": [1, 2]}},
    {"type": "integer", "minimum": 1, "maximum": 6},
    {"type": "integer", "minimum": -50, "maximum": 50},
    {"type": "integer", "exclusiveMinimum": 0, "exclusiveMaximum": 1000},
    {"type": "integer", "minimum": 1900},
    {"type": "number", "minimum": 0, "maximum": 1},
    {"type": "number", "minimum": -10, "maximum": -2},
    {"type": "string", "minLength": 3, "maxLength": 8},
    {"type": "string", "format": "date"},
    {"type": "string", "format": "date-time"},
    {"type": "string", "format": "uuid"},
    {"type": "string", "format": "email"},
    {"type": "string", "pattern": "^[A-Z]{3}-[0-9]{2,4}$"},
    {"type": "string", "pattern": "^(yes|no|maybe)$"},
    {"type": "array", "items": {"type": "integer"}, "maxItems": 5},
    {"type": "array", "items": {"type": "boolean"}, "minItems": 2, "maxItems": 4},
    {"type": "array", "prefixItems": [{"type": "string", "maxLength": 10}, {"type": "integer"}], "items": False},
    {"type": "array", "items": {"enum": ["a", "b", "c"]}, "minItems": 1, "maxItems": 3},
    {"type": "object", "properties": {"name": S, "age": {"type": "integer", "minimum": 0, "maximum": 130}},
     "required": ["name", "age"]},
    {"type": "object", "properties": {"a": {"type": "integer"}, "b": S, "c": {"type": "boolean"}},
     "required": ["b"]},
    {"type": "object", "properties": {"ok": {"type": "boolean"}}, "additionalProperties": False},
    {"type": "object", "properties": {"id": {"type": "integer"}}, "required": ["id"],
     "additionalProperties": {"type": "integer", "maximum": 9}},
    {"type": "object", "properties": {"point": {"type": "object", "properties": {
        "x": {"type": "number", "minimum": -100, "maximum": 100},
        "y": {"type": "number", "minimum": -100, "maximum": 100}}, "required": ["x", "y"]}},
     "required": ["point"]},
    {"type": "object", "properties": {"tags": {"type": "array", "items": S, "maxItems": 3},
                                      "score": {"type": "number"}}, "required": ["tags", "score"]},
    {"anyOf": [{"type": "integer"}, {"type": "object", "properties": {"v": S}, "required": ["v"]}]},
    {"oneOf": [{"const": "left"}, {"const": "right"}]},
    {"allOf": [{"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]},
               {"properties": {"b": {"type": "boolean"}}, "required": ["b"]}]},
    {"$defs": {"leaf": {"type": "object", "properties": {"v": {"type": "integer"}}, "required": ["v"]}},
     "type": "object", "properties": {"l": {"$ref": "#/$defs/leaf"}, "r": {"$ref": "#/$defs/leaf"}},
     "required": ["l", "r"]},
    {"$defs": {"name": {"type": "string", "maxLength": 16},
               "person": {"type": "object", "properties": {"name": {"$ref": "#/$defs/name"},
                                                           "friends": {"type": "array", "items": {"$ref": "#/$defs/name"},
                                                                       "maxItems": 2}},
                          "required": ["name", "friends"]}}, "$ref": "#/$defs/person"},
    {"type": ["string", "null"], "maxLength": 12},
    {"type": "string", "nullable": True, "maxLength": 12},
    {"type": "object", "properties": {"when": {"type": "string", "format": "date"},
                                      "who": {"type": "string", "format": "email"}},
     "required": ["when", "who"]},
    # Function-calling argument shapes.
    {"type": "object", "properties": {"location": {"type": "string", "maxLength": 30},
                                      "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
     "required": ["location", "unit"], "additionalProperties": False},
    {"type": "object", "properties": {"query": S, "limit": {"type": "integer", "minimum": 1, "maximum": 50}},
     "required": ["query"]},
    {"type": "object", "properties": {"to": {"type": "array", "items": {"type": "string", "format": "email"},
                                             "minItems": 1, "maxItems": 3},
                                      "subject": S, "urgent": {"type": "boolean"}},
     "required": ["to", "subject", "urgent"]},
    {"type": "object", "properties": {"expression": {"type": "string", "pattern": "^[0-9+*/ -]{1,20}$"}},
     "required": ["expression"]},
    {"type": "object", "properties": {"path": S, "mode": {"enum": ["r", "w", "a"]},
                                      "create": {"type": "boolean"}}, "required": ["path", "mode"]},
    {"type": "object", "properties": {"items": {"type": "array", "items": {"type": "object", "properties": {
        "sku": {"type": "string", "pattern": "^[A-Z]{2}[0-9]{3}$"},
        "qty": {"type": "integer", "minimum": 1, "maximum": 99}}, "required": ["sku", "qty"]},
        "minItems": 1, "maxItems": 3}}, "required": ["items"]},
    {"type": "object", "properties": {"start": {"type": "string", "format": "date-time"},
                                      "minutes": {"type": "integer", "minimum": 15, "maximum": 240}},
     "required": ["start", "minutes"]},
    {"type": "object", "properties": {"id": {"type": "string", "format": "uuid"},
                                      "status": {"enum": ["open", "closed"]}}, "required": ["id", "status"]},
    {"type": "object", "properties": {"lat": {"type": "number", "minimum": -90, "maximum": 90},
                                      "lon": {"type": "number", "minimum": -180, "maximum": 180}},
     "required": ["lat", "lon"]},
    {"type": "object", "properties": {"filters": {"type": "object", "properties": {
        "min_price": {"type": "number", "minimum": 0, "maximum": 10000},
        "category": {"anyOf": [{"type": "string", "maxLength": 12}, {"type": "null"}]}},
        "required": ["category"]}}, "required": ["filters"]},
]
assert len(SCHEMAS) == 50, len(SCHEMAS)


def post(path, body, expect=200):
    req = urllib.request.Request(URL + path, json.dumps(body).encode(),
                                 {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=300) as r:
            status, text = r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        status, text = e.code, e.read().decode()
    if status != expect:
        sys.exit(f"FAIL: {path} answered {status} (expected {expect}): {text[:400]}")
    return json.loads(text)


failures = []
for i, schema in enumerate(SCHEMAS):
    r = post("/v1/chat/completions", {
        "messages": [{"role": "user", "content": "Answer in JSON."}],
        "response_format": {"type": "json_schema", "json_schema": {"name": f"s{i}", "schema": schema, "strict": True}},
        "temperature": 1.0, "seed": 1000 + i, "max_tokens": 480})
    choice = r["choices"][0]
    text = choice["message"]["content"]
    try:
        if choice["finish_reason"] != "stop":
            raise ValueError(f"finish_reason {choice['finish_reason']}")
        schema_check.validate(json.loads(text), schema)
    except Exception as e:  # noqa: BLE001 - every failure is reported with its schema
        failures.append(f"schema {i} {json.dumps(schema)[:120]}: {e}\n    output: {text[:300]!r}")
if failures:
    sys.exit("FAIL: constrained outputs that do not hold:\n" + "\n".join(failures))
print(f"ok: {len(SCHEMAS)} schemas, every output valid")

# json_object: any object.
r = post("/v1/chat/completions", {"messages": [{"role": "user", "content": "JSON please"}],
                                  "response_format": {"type": "json_object"},
                                  "temperature": 1.0, "seed": 5, "max_tokens": 480})
assert isinstance(json.loads(r["choices"][0]["message"]["content"]), dict), r

# /v1/completions: llama-server's grammar and json_schema fields.
r = post("/v1/completions", {"prompt": "The answer is", "grammar": 'root ::= " " ("yes" | "no") "."',
                             "temperature": 1.0, "seed": 2, "max_tokens": 20})
assert r["choices"][0]["text"] in (" yes.", " no."), r
assert r["choices"][0]["finish_reason"] == "stop", r
r = post("/v1/completions", {"prompt": "Count:", "json_schema": {"type": "array", "items": {"type": "integer"},
                                                                 "minItems": 2, "maxItems": 2},
                             "temperature": 1.0, "seed": 3, "max_tokens": 100})
v = json.loads(r["choices"][0]["text"])
assert isinstance(v, list) and len(v) == 2 and all(isinstance(x, int) for x in v), r

# Streamed: the deltas add up to a valid document.
schema = SCHEMAS[26]
req = urllib.request.Request(URL + "/v1/chat/completions", json.dumps({
    "messages": [{"role": "user", "content": "Who?"}], "stream": True, "temperature": 1.0, "seed": 9,
    "max_tokens": 480, "response_format": {"type": "json_schema", "json_schema": {"name": "p", "schema": schema}},
}).encode(), {"Content-Type": "application/json"})
text, reason = "", None
with urllib.request.urlopen(req, timeout=300) as resp:
    for line in resp:
        line = line.decode().strip()
        if not line.startswith("data: ") or line == "data: [DONE]":
            continue
        ch = json.loads(line[6:])["choices"]
        if ch:
            text += ch[0]["delta"].get("content") or ""
            reason = ch[0].get("finish_reason") or reason
assert reason == "stop", reason
schema_check.validate(json.loads(text), schema)

# n > 1: each choice holds on its own.
r = post("/v1/chat/completions", {"messages": [{"role": "user", "content": "x"}], "n": 3, "seed": 4,
                                  "temperature": 1.0, "max_tokens": 300,
                                  "response_format": {"type": "json_schema", "json_schema": {"name": "e", "schema": SCHEMAS[6]}}})
assert sorted(c["index"] for c in r["choices"]) == [0, 1, 2]
for c in r["choices"]:
    assert json.loads(c["message"]["content"]) in ["red", "green", "blue"], c

# Refusals: what is not honoured is a 400 naming it.
chat = {"messages": [{"role": "user", "content": "x"}], "max_tokens": 5}
for extra, param, word in [
    ({"response_format": {"type": "json_schema", "json_schema": {"name": "u", "schema": {"type": "array", "uniqueItems": True}}}},
     "response_format.json_schema.schema", "uniqueItems"),
    ({"response_format": {"type": "json_schema", "json_schema": {"name": "u", "schema": {"type": "string", "format": "ipv4"}}}},
     "response_format.json_schema.schema", "ipv4"),
    ({"response_format": {"type": "json_schema", "json_schema": {"name": "u"}}}, "response_format.json_schema.schema", "required"),
    ({"response_format": {"type": "yaml"}}, "response_format.type", "yaml"),
    ({"response_format": "json"}, "response_format", "object"),
    ({"grammar": "root ::= foo"}, "grammar", "never defined"),
    ({"grammar": 'root ::= "a" | root "b"'}, "grammar", "left-recursive"),
    ({"grammar": 'root ::= "a"', "response_format": {"type": "json_object"}}, "grammar", "at most one"),
    ({"grammar": '(("a"{10000}){10000}){10000}'}, "grammar", "rule name"),
    ({"grammar": "root ::= r0\n" + "".join(f'r{k} ::= "a"{{0,10000}}\n' for k in range(20))}, "grammar", "elements"),
]:
    err = post("/v1/chat/completions", {**chat, **extra}, expect=400)["error"]
    assert err["param"] == param and word in err["message"], (extra, err)
print("ok: json_object, completions grammar/json_schema, stream, n=3, 10 refusals")
