#!/usr/bin/env python3
"""Paired A/B speed harness: jitllm (A) against a peer (B, e.g. llama.cpp's llama-bench).

Protocol (details and the reasons in docs/perf/README.md):
  1. warm-up: each arm once, discarded (page cache, clocks, output format check)
  2. A/A self-control: A run twice per round; if A against itself spreads more than 10%
     (IQR/median of the ratios) or its median ratio is off 1.0 by more than that noise, the machine
     is not fit to measure and nothing is recorded
  3. R rounds of A B B A; per round, mean(A) / mean(B) per metric; the row is the median ratio
     with its IQR/median, refused above 0.10
  4. both arms under the same `taskset -c CPUS` and the same thread count ({threads} in both
     commands), rows appended to docs/perf/<backend>.md
  5. every run waits for a quiet machine and is retried when other processes took more than
     --max-foreign of the pinned CPUs while it ran (ab_quiet.py); the row says the worst share
     kept and the load average

Python 3 standard library only, so it runs unchanged on the dev box and on the GPU machine.

  ab.py --a "build/rel/jitllm speed -m {model} -t {threads}" --a-parser auto \\
        --b "/opt/llama.cpp/bin/llama-bench -m {model} -t {threads} -p 512 -n 128 -r 3" \\
        --b-parser llama-bench-md --model MODEL.gguf --backend cpu --cpus 0-1 --threads 2
  ab.py --dry-run                       # the whole protocol on fake commands, prints the rows
  ab.py fake --format md --pp 190 --tg 47   # the fake benchmark itself
"""

import argparse
import os
import random
import re
import shlex
import shutil
import subprocess
import sys

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import ab_board  # noqa: E402
import ab_parsers  # noqa: E402
import ab_quiet  # noqa: E402
import ab_stats  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))

EXIT_OK, EXIT_ERROR, EXIT_ROWS_REFUSED, EXIT_AA_REFUSED = 0, 1, 2, 3


class HarnessError(Exception):
    pass


# ---------------------------------------------------------------------------------------------
# Arms: one command, pinned and parsed.

def build_argv(command, threads, model, cpus):
    """The argv of one arm. Both arms go through here, so pinning and threads are identical."""
    if threads is not None and "{threads}" not in command:
        raise HarnessError(f"command does not take its thread count from {{threads}}, so the two "
                           f"arms could run with different counts: {command}")
    if threads is None and "{threads}" in command:
        raise HarnessError(f"command uses {{threads}} but no --threads was given: {command}")
    text = command.replace("{threads}", str(threads) if threads is not None else "")
    if "{model}" in text:
        if model is None:
            raise HarnessError(f"command uses {{model}} but no --model was given: {command}")
        text = text.replace("{model}", shlex.quote(model))
    argv = shlex.split(text)
    if not argv:
        raise HarnessError("empty command")
    if cpus:
        argv = ["taskset", "-c", cpus] + argv
    return argv


class Arm:
    def __init__(self, label, argv, parser, threads=None, timeout_s=1800, env=None):
        self.label = label
        self.argv = argv
        self.parser = parser
        self.threads = threads
        self.timeout_s = timeout_s
        self.env = env

    def __call__(self):
        try:
            proc = subprocess.run(self.argv, capture_output=True, text=True,
                                  timeout=self.timeout_s, env=self.env)
        except subprocess.TimeoutExpired:
            raise HarnessError(f"arm {self.label}: timed out after {self.timeout_s} s: "
                               f"{shlex.join(self.argv)}") from None
        except OSError as e:
            raise HarnessError(f"arm {self.label}: cannot run {shlex.join(self.argv)}: {e}") from None
        if proc.returncode != 0:
            tail = (proc.stderr or proc.stdout).strip()[-800:]
            raise HarnessError(f"arm {self.label}: exit status {proc.returncode} from "
                               f"{shlex.join(self.argv)}:\n{tail}")
        try:
            results = ab_parsers.parse_output(self.parser, proc.stdout, proc.stderr)
        except ab_parsers.ParseError as e:
            raise HarnessError(f"arm {self.label}: {e}") from None
        check_threads(self.label, results, self.threads)
        return results


def check_threads(label, results, threads):
    """Where the tool reports its thread count, it must be the one both arms were given."""
    if threads is None:
        return
    for metric, m in results.items():
        if m.threads is not None and m.threads != threads:
            raise HarnessError(f"arm {label}: {metric} ran with {m.threads} threads, not the "
                               f"{threads} both arms were given")


# ---------------------------------------------------------------------------------------------
# The protocol, on any two callables returning {metric: Measurement} (tests pass fakes).

class MetricResult:
    def __init__(self, metric, aa, aa_refusal):
        self.metric = metric
        self.aa = aa
        self.aa_refusal = aa_refusal
        self.ab = None
        self.refusal = None
        self.verdict = None


def _values(results, metric, label):
    if metric not in results:
        raise HarnessError(f"arm {label}: no '{metric}' in its output (has: "
                           f"{', '.join(sorted(results)) or 'nothing'})")
    value = results[metric].tok_s
    if not value > 0:
        raise HarnessError(f"arm {label}: {metric} = {value} tok/s is not positive")
    return value


def run_protocol(run_a, run_b, metrics=None, rounds=6, aa_rounds=4, warmup=1, log=print):
    if rounds < 2 or aa_rounds < 2:
        raise HarnessError("need at least 2 rounds (and 2 A/A rounds) for a spread")
    if metrics is None and warmup < 1:
        raise HarnessError("without --metrics a warm-up run is needed to find the common metrics")
    for i in range(warmup):
        log(f"warm-up {i + 1}/{warmup}")
        first_a, first_b = run_a(), run_b()
        if metrics is None:
            metrics = sorted(set(first_a) & set(first_b))
            if not metrics:
                raise HarnessError(f"the arms share no metric (A: {sorted(first_a)}, "
                                   f"B: {sorted(first_b)})")
    log(f"metrics: {', '.join(metrics)}")

    aa_pairs = {m: [] for m in metrics}
    for i in range(aa_rounds):
        log(f"A/A round {i + 1}/{aa_rounds}")
        first, second = run_a(), run_a()
        for m in metrics:
            aa_pairs[m].append((_values(first, m, "A"), _values(second, m, "A")))
    results = []
    for m in metrics:
        firsts = [p[0] for p in aa_pairs[m]]
        seconds = [p[1] for p in aa_pairs[m]]
        aa = ab_stats.Summary(ab_stats.aa_ratios(aa_pairs[m]), firsts, seconds)
        results.append(MetricResult(m, aa, ab_stats.check_self_control(aa)))
    if any(r.aa_refusal for r in results):
        return results

    abba = {m: [] for m in metrics}
    for i in range(rounds):
        log(f"A/B round {i + 1}/{rounds} (A B B A)")
        a1, b1, b2, a2 = run_a(), run_b(), run_b(), run_a()
        for m in metrics:
            abba[m].append((_values(a1, m, "A"), _values(b1, m, "B"), _values(b2, m, "B"),
                            _values(a2, m, "A")))
    for r in results:
        rows = abba[r.metric]
        a_values = [v for row in rows for v in (row[0], row[3])]
        b_values = [v for row in rows for v in (row[1], row[2])]
        r.ab = ab_stats.Summary(ab_stats.abba_ratios(rows), a_values, b_values)
        r.refusal = ab_stats.check_row(r.ab)
        r.verdict = "refused: " + r.refusal if r.refusal else ab_stats.verdict(r.ab)
    return results


# ---------------------------------------------------------------------------------------------
# The fake benchmark used by --dry-run and the tests.

def fake_main(argv):
    p = argparse.ArgumentParser(prog="ab.py fake", description="print a fake benchmark result")
    p.add_argument("--format", choices=["md", "json", "lines"], default="md")
    p.add_argument("--pp", type=float, default=200.0, help="mean pp512 tok/s")
    p.add_argument("--tg", type=float, default=50.0, help="mean tg128 tok/s")
    p.add_argument("--noise", type=float, default=0.01, help="relative standard deviation")
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--seed", type=int, default=None)
    a = p.parse_args(argv)
    rng = random.Random(a.seed)
    values = {"pp512": a.pp * (1 + rng.gauss(0, a.noise)),
              "tg128": a.tg * (1 + rng.gauss(0, a.noise))}
    threads = a.threads if a.threads is not None else 1
    if a.format == "md":
        print("| model | size | params | backend | threads | test | t/s |")
        print("| ----- | ---: | -----: | ------- | ------: | ---: | --: |")
        for name, v in values.items():
            print(f"| fake 1B Q4_K - Medium | 762.81 MiB | 1.24 B | CPU | {threads} | {name} | "
                  f"{v:.2f} ± {v * a.noise:.2f} |")
        print("\nbuild: fake (0)")
    elif a.format == "json":
        records = []
        for name, v in values.items():
            n_prompt = int(name[2:]) if name.startswith("pp") else 0
            n_gen = int(name[2:]) if name.startswith("tg") else 0
            records.append(f'{{"n_threads": {threads}, "n_prompt": {n_prompt}, '
                           f'"n_gen": {n_gen}, "n_depth": 0, "avg_ts": {v:.6f}}}')
        print("[\n  " + ",\n  ".join(records) + "\n]")
    else:
        for name, v in values.items():
            print(f"{name}: {v:.2f} tok/s")
    return 0


# ---------------------------------------------------------------------------------------------
# Command line.

def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog="Parsers: " + ", ".join(ab_parsers.PARSERS)
                                + ", regex:METRIC=REGEX;... (see ab_parsers.py)")
    p.add_argument("--a", help="command of arm A (ours); {threads} and {model} are substituted")
    p.add_argument("--b", help="command of arm B (the peer)")
    p.add_argument("--a-parser", default="auto")
    p.add_argument("--b-parser", default="auto")
    p.add_argument("--model", help="model file, hashed for the board and substituted for {model}")
    p.add_argument("--model-sha", help="sha256 (prefix) of the model, to skip hashing a big file")
    p.add_argument("--backend", default="cpu", help="board name: docs/perf/<backend>.md")
    p.add_argument("--cpus", help="taskset CPU list for both arms, e.g. 0-1")
    p.add_argument("--threads", type=int, help="thread count for both arms ({threads})")
    p.add_argument("--metrics", help="comma list, e.g. pp512,tg128 (default: all both report)")
    p.add_argument("--rounds", type=int, default=6, help="A B B A rounds (default 6)")
    p.add_argument("--aa-rounds", type=int, default=4, help="A/A rounds (default 4)")
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--timeout", type=int, default=1800, help="seconds per command")
    p.add_argument("--max-foreign", type=float, default=0.10,
                   help="largest share of the pinned CPUs other processes may use during a run "
                        "(else it is retried; default 0.10; 1 turns the guard off)")
    p.add_argument("--quiet-wait", type=float, default=1800,
                   help="seconds to wait for a quiet machine before giving up (default 1800)")
    p.add_argument("--retries", type=int, default=20,
                   help="runs per arm that may be retried for foreign load (default 20)")
    p.add_argument("--out", help="board file (default docs/perf/<backend>.md in this repo)")
    p.add_argument("--build", help="build id for the board (default: git HEAD of this repo)")
    p.add_argument("--dry-run", action="store_true",
                   help="run the protocol on fake commands; print rows, write only with --out")
    p.add_argument("--dry-run-ratio", type=float, default=1.05,
                   help="fake A's speed over fake B's in --dry-run (default 1.05)")
    p.add_argument("--dry-run-noise", type=float, default=0.01)
    a = p.parse_args(argv)
    if not re.fullmatch(r"[a-z0-9_.-]+", a.backend):
        p.error(f"--backend '{a.backend}' must be a plain name (it names the board file)")
    if not a.dry_run and (not a.a or not a.b):
        p.error("--a and --b are required (or --dry-run)")
    if not a.dry_run and not a.model:
        p.error("--model is required: every row names the model it measured")
    if a.threads is not None and a.threads < 1:
        p.error("--threads must be >= 1")
    return a


def dry_run_commands(a):
    me = shlex.quote(os.path.abspath(__file__))
    py = shlex.quote(sys.executable or "python3")
    t = " --threads {threads}" if a.threads is not None else ""
    base_pp, base_tg = 190.0, 47.0
    cmd_a = (f"{py} {me} fake --format md --pp {base_pp * a.dry_run_ratio} "
             f"--tg {base_tg * a.dry_run_ratio} --noise {a.dry_run_noise}{t}")
    cmd_b = f"{py} {me} fake --format json --pp {base_pp} --tg {base_tg} --noise {a.dry_run_noise}{t}"
    return cmd_a, "llama-bench-md", cmd_b, "llama-bench-json"


def main(argv):
    if argv[:1] == ["fake"]:
        return fake_main(argv[1:])
    a = parse_args(argv)
    try:
        if a.cpus and not shutil.which("taskset"):
            raise HarnessError("--cpus needs taskset (util-linux), which is not on PATH")
        if a.dry_run:
            a.a, a.a_parser, a.b, a.b_parser = dry_run_commands(a)
        parser_a = ab_parsers.get_parser(a.a_parser)
        parser_b = ab_parsers.get_parser(a.b_parser)
        arm_a = Arm("A", build_argv(a.a, a.threads, a.model, a.cpus), parser_a, a.threads, a.timeout)
        arm_b = Arm("B", build_argv(a.b, a.threads, a.model, a.cpus), parser_b, a.threads, a.timeout)
        print(f"A: {shlex.join(arm_a.argv)}\nB: {shlex.join(arm_b.argv)}", flush=True)
        guards = []
        if a.max_foreign < 1.0 and not a.dry_run and os.path.exists("/proc/stat"):
            meter = ab_quiet.CpuMeter(a.cpus)
            log = lambda s: print(s, flush=True)  # noqa: E731
            arm_a, arm_b = (ab_quiet.QuietArm(arm, meter, a.max_foreign, a.quiet_wait,
                                              retries=a.retries, log=log, error=HarnessError)
                            for arm in (arm_a, arm_b))
            guards = [arm_a, arm_b]

        if a.model:
            model_name = os.path.basename(a.model)
            model_sha = a.model_sha or ab_board.sha256_prefix(a.model)
        else:
            model_name, model_sha = "fake (dry run)", "-"
        metrics = [m.strip() for m in a.metrics.split(",")] if a.metrics else None
        results = run_protocol(arm_a, arm_b, metrics, a.rounds, a.aa_rounds, a.warmup,
                               log=lambda s: print(s, flush=True))
    except (HarnessError, ValueError, OSError) as e:
        print(f"ab: error: {e}", file=sys.stderr)
        return EXIT_ERROR

    for r in results:
        print(f"A/A {r.metric}: median ratio {r.aa.ratio:.4f}, IQR/med {r.aa.rel_iqr:.4f}"
              + (f" -> REFUSED: {r.aa_refusal}" if r.aa_refusal else " ok")
              + " (rounds: " + " ".join(f"{x:.3f}" for x in r.aa.ratios) + ")")
    if any(r.aa_refusal for r in results):
        print("ab: A/A self-control failed; nothing recorded", file=sys.stderr)
        return EXIT_AA_REFUSED

    setup = (f"t={a.threads if a.threads is not None else '-'} cpus={a.cpus or 'all'} "
             f"R={a.rounds} AA={a.aa_rounds}")
    shares = [x for g in guards for x in g.shares]
    if shares:
        setup += f" foreign<={max(shares):.0%}"
    if hasattr(os, "getloadavg"):
        setup += f" load1={os.getloadavg()[0]:.2f}"
    if a.dry_run:
        setup += " dry-run"
    date = ab_board.today()
    machine = ab_board.machine_description(a.backend, a.cpus)
    build = a.build or ab_board.build_hash(REPO)
    rows = []
    for r in results:
        row = [date, machine, f"{model_name} ({model_sha})", build, setup, r.metric,
               f"{r.ab.a_median:.2f}", f"{r.ab.b_median:.2f}", f"{r.ab.ratio:.3f}",
               f"{r.ab.rel_iqr:.3f}", r.verdict]
        print(ab_board.format_row(row))
        # Each round's ratio, so a refused row still shows how far apart its rounds were.
        print(f"A/B {r.metric} per-round ratios: " + " ".join(f"{x:.3f}" for x in r.ab.ratios))
        if not r.refusal:
            rows.append(row)
    out = a.out or (None if a.dry_run else os.path.join(REPO, "docs", "perf", f"{a.backend}.md"))
    if out and rows:
        ab_board.append_rows(out, a.backend, rows)
        print(f"appended {len(rows)} row(s) to {out}")
    refused = [r for r in results if r.refusal]
    for r in refused:
        print(f"ab: {r.metric} refused: {r.refusal}", file=sys.stderr)
    return EXIT_ROWS_REFUSED if refused else EXIT_OK


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
