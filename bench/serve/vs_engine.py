#!/usr/bin/env python3
"""jitllmd against its own engine: the share of `jitllm batched`'s decode rate that the server
delivers to C streaming clients (issue 19's "server at the engine's speed" row).

One jitllmd stays up for the whole run (its kernels warm); the arms alternate E S S E per round:
E = `jitllm batched -s C -p P -n N` (P = the prompt length the server reported for load.py's
prompts), S = bench/serve/load.py with C closed-loop clients for --seconds. Per round the ratio is
mean(S) / mean(E); the row is the median ratio with its IQR/median, refused (exit 2) above 0.10.
A warm-up of each arm comes first and is discarded. The server's rate includes every request's
prefill and HTTP streaming, the engine's only its decode steps, so 1.0 is out of reach by design.
A benchmark, not a test (never run by ctest).

    python3 bench/serve/vs_engine.py -m models/demo --clients 16 [--rounds 3] [--seconds 10]
        [--devices cpu|cuda] [--bin build/release] [--prompt-words 128] [--max-tokens 128]
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))


def wait_ready(port, seconds):
    end = time.time() + seconds
    while time.time() < end:
        try:
            if urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2).status == 200:
                return
        except Exception:
            time.sleep(0.25)
    raise SystemExit(f"vs_engine: jitllmd not ready after {seconds} s")


def server_arm(args, url, out):
    subprocess.run([sys.executable, os.path.join(HERE, "load.py"), "--url", url, "--clients",
                    str(args.clients), "--seconds", str(args.seconds), "--prompt-tokens",
                    str(args.prompt_words), "--max-tokens", str(args.max_tokens), "--json", out],
                   check=True, stdout=subprocess.DEVNULL)
    row = json.load(open(out))["rows"][0]
    if row["errors"]:
        raise SystemExit(f"vs_engine: {row['errors']} failed requests")
    return row["output_tok_s"], row["prompt_tokens_mean"]


def engine_arm(args, prompt_tokens):
    cmd = [os.path.join(args.bin, "jitllm"), "batched", "-m", args.model, "-s", str(args.clients),
           "-p", str(prompt_tokens), "-n", str(args.max_tokens), "--devices", args.devices]
    text = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    m = re.search(r"sessions\s+\d+:\s+([\d.]+) tok/s total", text)
    if not m:
        raise SystemExit(f"vs_engine: no rate in `{' '.join(cmd)}`:\n{text}")
    return float(m.group(1))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-m", "--model", required=True)
    ap.add_argument("--clients", type=int, default=16)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--devices", default="cpu")
    ap.add_argument("--bin", default="build/release")
    ap.add_argument("--prompt-words", type=int, default=128)
    ap.add_argument("--max-tokens", type=int, default=128)
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="vs_engine.")
    port_file = os.path.join(tmp, "port")
    server = subprocess.Popen(
        [os.path.join(args.bin, "jitllmd"), "serve", "-m", args.model, "--devices", args.devices,
         "--parallel", str(args.clients), "--port", "0", "--port-file", port_file,
         "--log-level", "warn"], stderr=open(os.path.join(tmp, "jitllmd.log"), "w"))
    try:
        for _ in range(600):
            if os.path.exists(port_file) and open(port_file).read().strip():
                break
            time.sleep(0.1)
        port = int(open(port_file).read())
        wait_ready(port, 300)
        url = f"http://127.0.0.1:{port}"
        out = os.path.join(tmp, "load.json")
        _, prompt = server_arm(args, url, out)  # warm-up, and the prompt length to match
        prompt = int(round(prompt))
        engine_arm(args, prompt)
        ratios = []
        for r in range(args.rounds):
            e1 = engine_arm(args, prompt)
            s1, _ = server_arm(args, url, out)
            s2, _ = server_arm(args, url, out)
            e2 = engine_arm(args, prompt)
            ratios.append((s1 + s2) / (e1 + e2))
            print(f"round {r + 1}: engine {e1:.1f} / {e2:.1f} tok/s, server {s1:.1f} / {s2:.1f} "
                  f"tok/s, ratio {ratios[-1]:.3f}", flush=True)
    finally:
        server.terminate()
        server.wait()
    med = statistics.median(ratios)
    q = statistics.quantiles(ratios, n=4) if len(ratios) > 1 else [med, med, med]
    spread = (q[2] - q[0]) / med
    print(f"jitllmd / engine, {args.clients} clients, prompt {prompt} tokens, {args.max_tokens} "
          f"generated, {args.devices}: median {med:.3f}, IQR/median {spread:.3f} over "
          f"{len(ratios)} rounds" + (" (refused: spread > 0.10)" if spread > 0.10 else ""))
    sys.exit(2 if spread > 0.10 else 0)


if __name__ == "__main__":
    main()
