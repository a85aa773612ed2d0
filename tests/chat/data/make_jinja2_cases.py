#!/usr/bin/env python3
"""Regenerates the Jinja2 reference renders used by tests/chat (expected values come from
Python jinja2, never from jitllm). Environment = the oracle's (shared/oracle/templates/README.md):
ImmutableSandboxedEnvironment(trim_blocks, lstrip_blocks, loopcontrols), transformers' tojson,
raise_exception, {% generation %} passthrough, strftime_now at 2026-01-15 12:00:00 UTC.

  python3 tests/chat/data/make_jinja2_cases.py /work/shared/oracle/templates tests/chat/data

Writes templates_jinja2.json (every oracle template x the three oracle conversations and two
tool-calling conversations defined here, bos <s>, eos </s>) and snippets_jinja2.json (the snippets in snippets.jinja, separated by lines '=====').
"""
import datetime
import glob
import json
import os
import sys

import jinja2
from jinja2 import nodes
from jinja2.ext import Extension
from jinja2.sandbox import ImmutableSandboxedEnvironment

NOW = datetime.datetime(2026, 1, 15, 12, 0, 0, tzinfo=datetime.timezone.utc)


class Generation(Extension):
    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        return nodes.CallBlock(self.call_method("_render"), [], [], body).set_lineno(lineno)

    def _render(self, caller):
        return caller()


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def environment():
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                       extensions=[Generation, "jinja2.ext.loopcontrols"])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = lambda fmt: NOW.strftime(fmt)
    return env


def render(env, source, variables):
    try:
        return {"expected": env.from_string(source).render(**variables)}
    except Exception as e:  # the test only checks that jitllm fails too
        return {"expected": None, "error": f"{type(e).__name__}: {e}"}


def main():
    oracle, out_dir = sys.argv[1], sys.argv[2]
    env = environment()
    conversations = {}
    for path in sorted(glob.glob(os.path.join(oracle, "expected", "*.json"))):
        data = json.load(open(path))
        conversations[data["conversation"]] = data["messages"]
    # Two more conversations exercising the tool paths of the templates (ours, not the oracle's).
    weather = {"type": "function", "function": {"name": "get_weather", "description": "Get the weather",
               "parameters": {"type": "object", "properties": {"city": {"type": "string", "description": "City"},
                              "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}}, "required": ["city"]}}}
    def tool_conversation(arguments):
        return [{"role": "system", "content": "You are a helpful assistant."},
                {"role": "user", "content": "What's the weather in Paris?"},
                {"role": "assistant", "content": "", "tool_calls": [{"id": "a1b2c3d4e", "type": "function",
                 "function": {"name": "get_weather", "arguments": arguments}}]},
                {"role": "tool", "tool_call_id": "a1b2c3d4e", "name": "get_weather", "content": "{\"temp\": 18}"},
                {"role": "assistant", "content": "It is 18°C in Paris."},
                {"role": "user", "content": "Thanks!"}]
    tool_cases = {"tools_dict_arguments": tool_conversation({"city": "Paris", "unit": "celsius"}),
                  "tools_string_arguments": tool_conversation('{"city": "Paris", "unit": "celsius"}')}
    cases = []
    for path in sorted(glob.glob(os.path.join(oracle, "*.jinja"))):
        source = open(path, encoding="utf-8").read()
        for name, messages in sorted(conversations.items()):
            variables = {"messages": messages, "add_generation_prompt": True, "bos_token": "<s>",
                         "eos_token": "</s>", "enable_thinking": True, "date_string": "15 Jan 2026",
                         "datetime": "Jan 15 2026"}
            case = {"template": os.path.basename(path), "conversation": name}
            case.update(render(env, source, variables))
            cases.append(case)
        for name, messages in sorted(tool_cases.items()):
            variables = {"messages": messages, "add_generation_prompt": True, "bos_token": "<s>",
                         "eos_token": "</s>", "enable_thinking": True, "date_string": "15 Jan 2026",
                         "datetime": "Jan 15 2026", "tools": [weather]}
            case = {"template": os.path.basename(path), "conversation": name}
            case.update(render(env, source, variables))
            cases.append(case)
    with open(os.path.join(out_dir, "templates_jinja2.json"), "w", encoding="utf-8") as f:
        json.dump({"renderer": f"python3-jinja2 {jinja2.__version__}",
                   "tool_conversations": {k: {"messages": v, "tools": [weather]} for k, v in tool_cases.items()},
                   "cases": cases}, f, ensure_ascii=False, indent=1)

    snippets_src = open(os.path.join(out_dir, "snippets.jinja"), encoding="utf-8").read()
    context = {"messages": [{"role": "system", "content": " Be brief. "},
                            {"role": "user", "content": "Café ☕ and \"quotes\"\n"},
                            {"role": "assistant", "content": "Ok", "tool_calls": [
                                {"type": "function", "function": {"name": "get", "arguments": {"q": 1.5, "b": [True, None]}}}]}],
               "tools": [{"type": "function", "function": {"name": "get", "description": "Get it.",
                                                            "parameters": {"type": "object", "properties": {"q": {"type": "number"}}}}}],
               "n": 7, "f": 2.5, "s": "Hello World", "empty": "", "lst": [3, 1, 2], "d": {"b": 1, "a": 2, "C": 3}}
    snippets = []
    for source in snippets_src.split("\n=====\n"):
        case = {"template": source}
        case.update(render(env, source, context))
        snippets.append(case)
    with open(os.path.join(out_dir, "snippets_jinja2.json"), "w", encoding="utf-8") as f:
        json.dump({"renderer": f"python3-jinja2 {jinja2.__version__}", "context": context, "cases": snippets},
                  f, ensure_ascii=False, indent=1)


if __name__ == "__main__":
    main()
