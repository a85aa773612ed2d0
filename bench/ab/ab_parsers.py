"""Parsers that turn a benchmark command's output into {metric: Measurement}. A metric is a test
name in llama-bench's spelling ("pp512", "tg128", "pp512+tg128", "pp512 @ d1024"); the value is
its throughput in tok/s. Parsers raise ParseError (with a snippet of the output) when they find
nothing, so a changed output format stops the harness instead of recording zeros.

Parsers, by --a-parser / --b-parser name:
  llama-bench-md    llama-bench's default markdown table (columns found by name: test, t/s,
                    and threads when present), "mean ± std" values
  llama-bench-json  llama-bench -o json (one array) or -o jsonl (one object per line)
  tok-s-lines       lines "<metric>: <number> tok/s" (or "t/s"), e.g. "tg128: 47.3 tok/s"
  jitllm-batched    `jitllm batched` lines "sessions  32:  4859.6 tok/s total, ..." as
                    "sessions32" (total decode tok/s of N sessions stepped together)
  llama-batched-bench-md
                    llama-batched-bench's table (columns PP, TG, B, ..., S_TG t/s found by name):
                    S_TG of each row as "sessions<B>" (rows of one B must agree on one PP/TG)
  auto              json, then markdown table, then tok-s lines
  regex:M=RE;M=RE   custom: for each metric M, the first group of RE (searched in the output)
"""

import json
import re


class ParseError(ValueError):
    pass


class Measurement:
    def __init__(self, tok_s, threads=None):
        self.tok_s = float(tok_s)
        self.threads = threads

    def __repr__(self):
        return f"Measurement({self.tok_s}, threads={self.threads})"


def _snippet(text, limit=400):
    text = text.strip()
    return text if len(text) <= limit else text[:limit] + " ..."


def _test_name(n_prompt, n_gen, n_depth=0):
    # Same spelling as llama-bench's markdown "test" column.
    if n_prompt > 0 and n_gen == 0:
        name = f"pp{n_prompt}"
    elif n_gen > 0 and n_prompt == 0:
        name = f"tg{n_gen}"
    else:
        name = f"pp{n_prompt}+tg{n_gen}"
    if n_depth:
        name += f" @ d{n_depth}"
    return name


def _split_row(line):
    cells = [c.strip() for c in line.strip().strip("|").split("|")]
    return cells


def _table_rows(text, columns, what):
    """(row as {column: cell}, line) of every markdown table whose header names all of `columns`
    (a non-blank line that is not a table row ends a table)."""
    header = None
    for line in text.splitlines():
        if not line.lstrip().startswith("|"):
            if line.strip():
                header = None
            continue
        cells = _split_row(line)
        if all(c in cells for c in columns):
            header = cells
            continue
        if header is None or all(set(c) <= set("-: ") for c in cells):
            continue  # separator row, or a table of another tool
        if len(cells) != len(header):
            raise ParseError(f"{what} table row has {len(cells)} cells, header has "
                             f"{len(header)}: {line.strip()}")
        yield dict(zip(header, cells)), line


def parse_llama_bench_md(text):
    results = {}
    for row, _ in _table_rows(text, ("test", "t/s"), "llama-bench"):
        match = re.match(r"^\s*([0-9.eE+-]+)", row["t/s"])
        if not match:
            raise ParseError(f"llama-bench t/s cell '{row['t/s']}' is not a number")
        threads = int(row["threads"]) if row.get("threads", "").isdigit() else None
        results[row["test"]] = Measurement(match.group(1), threads)
    if not results:
        raise ParseError("no llama-bench markdown table (| ... | test | t/s |) in output: "
                         + _snippet(text))
    return results


def parse_llama_bench_json(text):
    text = text.strip()
    objects = []
    try:
        data = json.loads(text)
        objects = data if isinstance(data, list) else [data]
    except json.JSONDecodeError:
        for line in text.splitlines():
            line = line.strip()
            if line.startswith("{"):
                try:
                    objects.append(json.loads(line))
                except json.JSONDecodeError as e:
                    raise ParseError(f"bad JSON line ({e}): {_snippet(line, 200)}") from None
    results = {}
    for obj in objects:
        if not isinstance(obj, dict) or "avg_ts" not in obj:
            continue
        try:
            name = _test_name(int(obj.get("n_prompt", 0)), int(obj.get("n_gen", 0)),
                              int(obj.get("n_depth", 0) or 0))
            threads = obj.get("n_threads")
            results[name] = Measurement(obj["avg_ts"], int(threads) if threads is not None else None)
        except (TypeError, ValueError) as e:
            raise ParseError(f"llama-bench JSON record with bad fields ({e}): "
                             + _snippet(json.dumps(obj), 200)) from None
    if not results:
        raise ParseError("no llama-bench JSON records (with avg_ts) in output: " + _snippet(text))
    return results


_TOK_S_LINE = re.compile(
    r"^\s*(?P<metric>(?:pp|tg)\d+(?:\+tg\d+)?(?: @ d\d+)?)\s*[:=]\s*(?P<value>[0-9.eE+-]+)\s*"
    r"(?:tok/s|t/s)\b", re.MULTILINE)


def parse_tok_s_lines(text):
    results = {}
    for match in _TOK_S_LINE.finditer(text):
        results[match.group("metric")] = Measurement(match.group("value"))
    if not results:
        raise ParseError("no '<metric>: <number> tok/s' lines in output: " + _snippet(text))
    return results


_SESSIONS_LINE = re.compile(r"^\s*sessions\s+(?P<n>\d+):\s+(?P<value>[0-9.eE+-]+)\s+tok/s total",
                            re.MULTILINE)


def parse_jitllm_batched(text):
    results = {}
    for match in _SESSIONS_LINE.finditer(text):
        results[f"sessions{match.group('n')}"] = Measurement(match.group("value"))
    if not results:
        raise ParseError("no 'sessions N: <number> tok/s total' lines in output: " + _snippet(text))
    return results


def parse_llama_batched_bench_md(text):
    results = {}
    shape = {}
    for row, line in _table_rows(text, ("B", "S_TG t/s"), "llama-batched-bench"):
        try:
            b, value = int(row["B"]), float(row["S_TG t/s"])
        except ValueError:
            raise ParseError(f"llama-batched-bench row with bad B / S_TG cells: {line.strip()}") from None
        key = (row.get("PP"), row.get("TG"))
        if shape.setdefault(b, key) != key:
            raise ParseError(f"llama-batched-bench rows of B = {b} with different PP/TG: {line.strip()}")
        results[f"sessions{b}"] = Measurement(value)
    if not results:
        raise ParseError("no llama-batched-bench table (| PP | TG | B | ... | S_TG t/s |) in output: "
                         + _snippet(text))
    return results


def parse_auto(text):
    errors = []
    for parser in (parse_llama_bench_json, parse_llama_bench_md, parse_tok_s_lines):
        try:
            return parser(text)
        except ParseError as e:
            errors.append(str(e).split(":")[0])
    raise ParseError("output matched no known format (" + "; ".join(errors) + "): "
                     + _snippet(text))


def make_regex_parser(spec):
    """spec: 'pp512=prompt ([0-9.]+) tok/s;tg128=gen ([0-9.]+) tok/s'."""
    patterns = {}
    for part in spec.split(";"):
        if not part.strip():
            continue
        metric, sep, pattern = part.partition("=")
        if not sep or not metric.strip() or not pattern:
            raise ValueError(f"regex parser item '{part}' is not METRIC=REGEX")
        compiled = re.compile(pattern)
        if compiled.groups < 1:
            raise ValueError(f"regex for {metric.strip()} has no capturing group: {pattern}")
        patterns[metric.strip()] = compiled

    def parse(text):
        results = {}
        for metric, compiled in patterns.items():
            match = compiled.search(text)
            if not match:
                raise ParseError(f"regex for {metric} ({compiled.pattern}) found nothing in "
                                 "output: " + _snippet(text))
            results[metric] = Measurement(match.group(1))
        return results

    return parse


PARSERS = {
    "llama-bench-md": parse_llama_bench_md,
    "llama-bench-json": parse_llama_bench_json,
    "tok-s-lines": parse_tok_s_lines,
    "jitllm-batched": parse_jitllm_batched,
    "llama-batched-bench-md": parse_llama_batched_bench_md,
    "auto": parse_auto,
}


def get_parser(name):
    if name.startswith("regex:"):
        return make_regex_parser(name[len("regex:"):])
    if name not in PARSERS:
        raise ValueError(f"unknown parser '{name}' (known: {', '.join(PARSERS)}, regex:M=RE;...)")
    return PARSERS[name]


def parse_output(parser, stdout, stderr):
    """Parses stdout; tools that print their numbers to stderr are read from there instead."""
    try:
        return parser(stdout)
    except ParseError as first:
        if not stderr.strip():
            raise
        try:
            return parser(stderr)
        except ParseError:
            raise first from None
