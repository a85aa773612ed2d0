#!/usr/bin/env python3
"""Load generator for OpenAI-style servers (jitllmd, llama-server, vLLM): C closed-loop clients
for a fixed time, each streaming one request after another; prints output tok/s over the window,
TTFT and inter-token latency percentiles, and errors. The same client for every server, so their
numbers compare. A benchmark, not a test (never run by ctest). Python's standard library only, so
it runs on the GPU machine and the dev box alike.

    python3 bench/serve/load.py --url http://127.0.0.1:8080 --clients 1,16,64 --seconds 30 \\
        [--route completions|chat] [--prompt-tokens 128] [--max-tokens 128] [--model NAME] \\
        [--extra '{"response_format": {"type": "json_object"}}'] [--json OUT.json]

Prompts are about --prompt-tokens words (a word is about a token for llama-like vocabularies; the
usage the server reports is what counts), different per client so no server shares a prefix
between clients. Generation is greedy and ignores EOS (jitllmd and llama-server know ignore_eos).
A request that ends in the window counts the completion tokens its server reports; one that
crosses the end counts the content chunks that arrived before it (one per token on jitllmd and
llama-server). --extra merges its JSON object into every request body (an output constraint,
sampling options), so one run can be set beside another that differs only there.
"""
import argparse
import http.client
import json
import threading
import time
import urllib.parse

WORDS = "the quick brown fox jumps over a lazy dog while seven wizards quietly judge boxes".split()


def prompt_for(client, n):
    body = " ".join(WORDS[(i + client) % len(WORDS)] for i in range(max(1, n - 4)))
    return f"Client {client} says: {body}"


def one_request(args, client, deadline, stats):
    u = urllib.parse.urlparse(args.url)
    conn = http.client.HTTPConnection(u.hostname, u.port or 80, timeout=600)
    body = {"max_tokens": args.max_tokens, "temperature": 0, "ignore_eos": True, "stream": True,
            "stream_options": {"include_usage": True}}
    if args.model:
        body["model"] = args.model
    body.update(args.extra)
    if args.route == "chat":
        path = "/v1/chat/completions"
        body["messages"] = [{"role": "user", "content": prompt_for(client, args.prompt_tokens)}]
    else:
        path = "/v1/completions"
        body["prompt"] = prompt_for(client, args.prompt_tokens)
    t0 = time.perf_counter()
    conn.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
    res = conn.getresponse()
    if res.status != 200:
        raise RuntimeError(f"status {res.status}: {res.read()[:200]!r}")
    ttft, last, chunks, in_window, usage, gaps = None, None, 0, 0, None, []
    buf = b""
    while True:
        part = res.read1(65536)
        if not part:
            break
        buf += part
        while b"\n\n" in buf:
            line, buf = buf.split(b"\n\n", 1)
            line = line.strip()
            if not line.startswith(b"data: {"):
                continue
            chunk = json.loads(line[6:])
            if "error" in chunk:
                raise RuntimeError(json.dumps(chunk["error"])[:200])
            if chunk.get("usage"):
                usage = chunk["usage"]
            choices = chunk.get("choices") or [{}]
            text = choices[0].get("text") or (choices[0].get("delta") or {}).get("content") or ""
            if not text:
                continue
            now = time.perf_counter()
            if ttft is None:
                ttft = now - t0
            else:
                gaps.append(now - last)
            last = now
            chunks += 1
            if now <= deadline:
                in_window += 1
    conn.close()
    done = time.perf_counter() <= deadline
    tokens = ((usage or {}).get("completion_tokens", chunks)) if done else in_window
    with stats["lock"]:
        stats["tokens"] += tokens
        if done:
            stats["requests"] += 1
            if usage and "prompt_tokens" in usage:
                stats["prompt_tokens"].append(usage["prompt_tokens"])
        if ttft is not None:
            stats["ttft"].append(ttft)
        stats["gaps"].extend(gaps)
    return done


def pct(xs, p):
    if not xs:
        return float("nan")
    s = sorted(xs)
    return s[min(len(s) - 1, int(p / 100 * len(s)))] * 1000


def run(args, clients):
    stats = {"lock": threading.Lock(), "tokens": 0, "requests": 0, "errors": 0, "ttft": [],
             "gaps": [], "first_error": "", "prompt_tokens": []}
    start = time.perf_counter()
    deadline = start + args.seconds

    def client_loop(c):
        while time.perf_counter() < deadline:
            try:
                if not one_request(args, c, deadline, stats):
                    break
            except Exception as e:  # a benchmark reports errors, it does not stop on them
                with stats["lock"]:
                    stats["errors"] += 1
                    stats["first_error"] = stats["first_error"] or str(e)
                time.sleep(0.05)

    threads = [threading.Thread(target=client_loop, args=(c,)) for c in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    row = {"clients": clients, "requests": stats["requests"], "errors": stats["errors"],
           "output_tok_s": stats["tokens"] / args.seconds,
           "ttft_ms": {p: pct(stats["ttft"], p) for p in (50, 90, 99)},
           "itl_ms": {p: pct(stats["gaps"], p) for p in (50, 90, 99)},
           # the server's count: the engine run to compare with takes this prompt length
           "prompt_tokens_mean": (sum(stats["prompt_tokens"]) / len(stats["prompt_tokens"])
                                  if stats["prompt_tokens"] else float("nan"))}
    t, i = row["ttft_ms"], row["itl_ms"]
    print(f"clients {clients}: {row['output_tok_s']:.1f} tok/s, {row['requests']} requests, "
          f"{row['errors']} errors | TTFT p50/p90/p99 {t[50]:.1f}/{t[90]:.1f}/{t[99]:.1f} ms | "
          f"ITL p50/p90/p99 {i[50]:.1f}/{i[90]:.1f}/{i[99]:.1f} ms | "
          f"prompt {row['prompt_tokens_mean']:.0f} tokens"
          + (f" | first error: {stats['first_error']}" if stats["first_error"] else ""), flush=True)
    return row


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--url", default="http://127.0.0.1:8080")
    ap.add_argument("--clients", default="1,16")
    ap.add_argument("--seconds", type=float, default=20)
    ap.add_argument("--route", choices=["completions", "chat"], default="completions")
    ap.add_argument("--prompt-tokens", type=int, default=128)
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--model")
    ap.add_argument("--extra", type=json.loads, default={},
                    help="a JSON object merged into every request body")
    ap.add_argument("--json")
    args = ap.parse_args()
    rows = [run(args, int(c)) for c in args.clients.split(",")]
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"url": args.url, "route": args.route, "prompt_tokens": args.prompt_tokens,
                       "max_tokens": args.max_tokens, "seconds": args.seconds, "extra": args.extra,
                       "rows": rows}, f,
                      indent=1)


if __name__ == "__main__":
    main()
