#!/usr/bin/env python3
"""Unit tests of the A/B harness: statistics, refusal rules, protocol order, parsers, board rows,
and one end-to-end --dry-run. Expected numbers are worked out by hand in the comments.
Run: python3 bench/ab/test_ab.py  (registered in ctest as bench.ab_harness)."""

import os
import subprocess
import sys
import tempfile
import unittest

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import ab  # noqa: E402
import ab_board  # noqa: E402
import ab_parsers  # noqa: E402
import ab_quiet  # noqa: E402
import ab_stats  # noqa: E402
from ab_parsers import Measurement  # noqa: E402


class StatsTest(unittest.TestCase):
    def test_quartiles_and_rel_iqr(self):
        # 1..5: q1 = 2, q3 = 4 (linear interpolation), median 3 -> IQR/median = 2/3.
        self.assertEqual(ab_stats.quartiles([5, 1, 4, 2, 3]), (2, 4))
        self.assertAlmostEqual(ab_stats.rel_iqr([1, 2, 3, 4, 5]), 2 / 3)
        # 1..4: q1 = 1.75, q3 = 3.25, median 2.5 -> 0.6.
        self.assertAlmostEqual(ab_stats.rel_iqr([4, 3, 2, 1]), 0.6)
        self.assertEqual(ab_stats.rel_iqr([2.0, 2.0, 2.0]), 0.0)

    def test_abba_ratio_cancels_linear_drift(self):
        self.assertEqual(ab_stats.abba_ratios([(100, 50, 50, 100)]), [2.0])
        # Both arms equally fast, the machine slowing 10% per run: A at t=0,3; B at t=1,2.
        drift = [100 * (1 + 0.1 * t) for t in range(4)]
        self.assertAlmostEqual(ab_stats.abba_ratios([tuple(drift)])[0], 1.0)

    def test_aa_alternation_turns_order_bias_into_spread(self):
        # The first of two runs is always 10% faster: alternating the numerator gives
        # 1.1, 1/1.1, 1.1, 1/1.1 -> median ~1.0045 but IQR/median ~0.19: refused as noisy.
        ratios = ab_stats.aa_ratios([(110, 100)] * 4)
        self.assertAlmostEqual(ratios[0], 1.1)
        self.assertAlmostEqual(ratios[1], 1 / 1.1)
        summary = ab_stats.Summary(ratios, [110] * 4, [100] * 4)
        self.assertIn("too noisy", ab_stats.check_self_control(summary))

    def test_self_control(self):
        quiet = ab_stats.Summary([1.0, 1.01, 0.99, 1.0], [1], [1])
        self.assertIsNone(ab_stats.check_self_control(quiet))
        noisy = ab_stats.Summary([0.8, 1.0, 1.2, 1.0], [1], [1])  # IQR/med = 0.15
        self.assertIn("too noisy", ab_stats.check_self_control(noisy))
        # Tight (IQR/med ~0.007, noise floor 0.01) but 5% off 1.0: A is not interchangeable
        # with itself.
        biased = ab_stats.Summary([1.05, 1.05, 1.06, 1.05], [1], [1])
        self.assertIn("off 1.0", ab_stats.check_self_control(biased))

    def test_row_refusal_threshold(self):
        # 0.9, 1.0, 1.1, 1.2, 1.3: q1 1.0, q3 1.2, median 1.1 -> IQR/med 0.18 > 0.10.
        wide = ab_stats.Summary([0.9, 1.0, 1.1, 1.2, 1.3], [1], [1])
        self.assertIn("too noisy", ab_stats.check_row(wide))
        # 1.18 .. 1.22: IQR/med 0.02/1.2 ~ 0.017.
        ok = ab_stats.Summary([1.18, 1.19, 1.2, 1.21, 1.22], [1], [1])
        self.assertIsNone(ab_stats.check_row(ok))

    def test_verdict(self):
        self.assertTrue(ab_stats.verdict(ab_stats.Summary([1.2] * 4, [1], [1])).startswith(
            "A faster (+20.0%)"))
        self.assertTrue(ab_stats.verdict(ab_stats.Summary([0.8] * 4, [1], [1])).startswith(
            "B faster (+25.0%)"))  # B/A = 1.25
        self.assertEqual(ab_stats.verdict(ab_stats.Summary([1.005] * 4, [1], [1])),
                         "tie (within noise)")
        # A 3% edge inside a 4% spread is a tie, not a win.
        spread = ab_stats.Summary([0.99, 1.01, 1.03, 1.05, 1.07], [1], [1])
        self.assertEqual(ab_stats.verdict(spread), "tie (within noise)")


class FakeArm:
    """Returns a scripted sequence of throughputs and counts its calls."""

    def __init__(self, values, metric="tg128"):
        self.values = list(values)
        self.metric = metric
        self.calls = 0

    def __call__(self):
        v = self.values[self.calls % len(self.values)]
        self.calls += 1
        return {self.metric: Measurement(v)}


class ProtocolTest(unittest.TestCase):
    def quiet(self, *args, **kwargs):
        return ab.run_protocol(*args, log=lambda s: None, **kwargs)

    def test_accepted_row_and_run_counts(self):
        # A alternates 100.5 / 100: A/A ratios 1.005, 0.995, 1.005, inside the 1% noise floor.
        a = FakeArm([100.0, 100.5])
        b = FakeArm([80.0, 80.5, 79.5])
        (r,) = self.quiet(a, b, rounds=5, aa_rounds=3, warmup=1)
        # A: 1 warm-up + 2 per A/A round + 2 per A/B round; B: 1 warm-up + 2 per A/B round.
        self.assertEqual(a.calls, 1 + 2 * 3 + 2 * 5)
        self.assertEqual(b.calls, 1 + 2 * 5)
        self.assertIsNone(r.aa_refusal)
        self.assertIsNone(r.refusal)
        self.assertAlmostEqual(r.ab.ratio, 1.25, delta=0.02)
        self.assertTrue(r.verdict.startswith("A faster"))

    def test_aa_refusal_runs_no_b_rounds(self):
        a = FakeArm([100.0, 70.0, 130.0, 90.0, 115.0])  # 30% swings
        b = FakeArm([80.0])
        (r,) = self.quiet(a, b, rounds=5, aa_rounds=4, warmup=1)
        self.assertIsNotNone(r.aa_refusal)
        self.assertIsNone(r.ab)
        self.assertEqual(b.calls, 1)  # the warm-up only

    def test_noisy_b_refuses_the_row(self):
        a = FakeArm([100.0])
        b = FakeArm([60.0, 100.0, 140.0, 80.0, 120.0, 70.0])
        (r,) = self.quiet(a, b, rounds=6, aa_rounds=2, warmup=1)
        self.assertIsNone(r.aa_refusal)
        self.assertIsNotNone(r.refusal)
        self.assertTrue(r.verdict.startswith("refused"))

    def test_missing_metric_is_an_error(self):
        a = FakeArm([100.0], metric="pp512")
        b = FakeArm([100.0], metric="tg128")
        with self.assertRaises(ab.HarnessError):
            self.quiet(a, b, warmup=1)
        with self.assertRaises(ab.HarnessError):
            self.quiet(a, b, metrics=["pp512"], warmup=0, rounds=2, aa_rounds=2)

    def test_too_few_rounds(self):
        with self.assertRaises(ab.HarnessError):
            self.quiet(FakeArm([1.0]), FakeArm([1.0]), rounds=1)


LLAMA_BENCH_CPU = """\
load_backend: loaded CPU backend from /opt/llama.cpp/libggml-cpu.so
| model                          |       size |     params | backend    | threads |            test |                  t/s |
| ------------------------------ | ---------: | ---------: | ---------- | ------: | --------------: | -------------------: |
| llama 1B Q4_K - Medium         | 762.81 MiB |     1.24 B | CPU        |       2 |           pp512 |        189.40 ± 1.23 |
| llama 1B Q4_K - Medium         | 762.81 MiB |     1.24 B | CPU        |       2 |           tg128 |         47.30 ± 0.08 |
| llama 1B Q4_K - Medium         | 762.81 MiB |     1.24 B | CPU        |       2 |   pp512 @ d1024 |        150.00 ± 2.00 |

build: d32676d (10472)
"""

LLAMA_BENCH_GPU = """\
| model                          |       size |     params | backend    | ngl |            test |                  t/s |
| ------------------------------ | ---------: | ---------: | ---------- | --: | --------------: | -------------------: |
| llama 8B Q4_K - Medium         |   4.58 GiB |     8.03 B | CUDA       |  99 |           pp512 |      9164.21 ± 12.01 |
| llama 8B Q4_K - Medium         |   4.58 GiB |     8.03 B | CUDA       |  99 |           tg128 |        262.02 ± 0.31 |
"""

LLAMA_BENCH_JSON = """[
  {
    "build_commit": "d32676d",
    "n_threads": 2,
    "n_prompt": 512,
    "n_gen": 0,
    "n_depth": 0,
    "avg_ts": 189.401,
    "stddev_ts": 1.2,
    "samples_ts": [ 188.1, 190.6 ]
  },
  {
    "build_commit": "d32676d",
    "n_threads": 2,
    "n_prompt": 0,
    "n_gen": 128,
    "n_depth": 0,
    "avg_ts": 47.3,
    "stddev_ts": 0.08,
    "samples_ts": [ 47.2, 47.4 ]
  }
]
"""


class ParserTest(unittest.TestCase):
    def test_llama_bench_markdown_cpu(self):
        r = ab_parsers.parse_llama_bench_md(LLAMA_BENCH_CPU)
        self.assertEqual(set(r), {"pp512", "tg128", "pp512 @ d1024"})
        self.assertEqual(r["pp512"].tok_s, 189.40)
        self.assertEqual(r["tg128"].tok_s, 47.30)
        self.assertEqual(r["tg128"].threads, 2)

    def test_llama_bench_markdown_gpu_has_no_threads_column(self):
        r = ab_parsers.parse_llama_bench_md(LLAMA_BENCH_GPU)
        self.assertEqual(r["pp512"].tok_s, 9164.21)
        self.assertIsNone(r["pp512"].threads)

    def test_llama_bench_json_and_jsonl(self):
        r = ab_parsers.parse_llama_bench_json(LLAMA_BENCH_JSON)
        self.assertEqual(r["pp512"].tok_s, 189.401)
        self.assertEqual(r["tg128"].tok_s, 47.3)
        self.assertEqual(r["tg128"].threads, 2)
        jsonl = ('{"n_threads": 4, "n_prompt": 512, "n_gen": 128, "n_depth": 0, "avg_ts": 90.5}\n'
                 '{"n_threads": 4, "n_prompt": 0, "n_gen": 128, "n_depth": 4096, "avg_ts": 40}\n')
        r = ab_parsers.parse_llama_bench_json(jsonl)
        self.assertEqual(r["pp512+tg128"].tok_s, 90.5)
        self.assertEqual(r["tg128 @ d4096"].tok_s, 40.0)

    def test_tok_s_lines_regex_and_auto(self):
        text = "loading...\npp512: 201.5 tok/s\ntg128 = 48.25 t/s (12.1 GB/s)\n"
        r = ab_parsers.parse_tok_s_lines(text)
        self.assertEqual((r["pp512"].tok_s, r["tg128"].tok_s), (201.5, 48.25))
        regex = ab_parsers.get_parser(r"regex:tg128=generation: ([0-9.]+) tok/s")
        self.assertEqual(regex("prompt: 10 tok/s\ngeneration: 33.5 tok/s\n")["tg128"].tok_s, 33.5)
        auto = ab_parsers.get_parser("auto")
        self.assertEqual(auto(LLAMA_BENCH_JSON)["pp512"].tok_s, 189.401)
        self.assertEqual(auto(LLAMA_BENCH_CPU)["pp512"].tok_s, 189.40)
        self.assertEqual(auto(text)["tg128"].tok_s, 48.25)

    def test_sessions_together_parsers(self):
        # jitllm batched and llama-batched-bench (8B, 128 + 128, npl 1,32): total decode tok/s.
        ours = ("sessions   1:     294.4 tok/s total,   294.4 tok/s per session,   3.396 ms per step\n"
                "sessions  32:    4859.6 tok/s total,   151.9 tok/s per session,   6.585 ms per step\n")
        got = ab_parsers.get_parser("jitllm-batched")(ours)
        self.assertEqual(sorted(got), ["sessions1", "sessions32"])
        self.assertEqual(got["sessions32"].tok_s, 4859.6)
        peer = ("main: n_kv_max = 16384, n_batch = 2048\n\n"
                "|    PP |     TG |    B |   N_KV |   T_PP s | S_PP t/s |   T_TG s | S_TG t/s |      T s |    S t/s |\n"
                "|-------|--------|------|--------|----------|----------|----------|----------|----------|----------|\n"
                "|   128 |    128 |    1 |    256 |    0.036 |  3556.15 |    0.493 |   259.61 |    0.529 |   483.89 |\n"
                "|   128 |    128 |   32 |   8192 |    0.416 |  9843.24 |    1.248 |  3281.75 |    1.664 |  4922.38 |\n")
        got = ab_parsers.get_parser("llama-batched-bench-md")(peer)
        self.assertEqual(got["sessions32"].tok_s, 3281.75)
        self.assertEqual(got["sessions1"].tok_s, 259.61)
        for parser, text in (("jitllm-batched", "pp512: 1 tok/s"), ("llama-batched-bench-md", ours),
                             ("llama-batched-bench-md",  # B = 32 twice, with other prompts
                              peer + "|   256 |    128 |   32 |   8192 |    0.4 |  9.0 |    1.2 |   3000.0 |    1.6 |  4900.0 |\n")):
            with self.assertRaises(ab_parsers.ParseError, msg=parser):
                ab_parsers.get_parser(parser)(text)

    def test_garbage_is_a_parse_error(self):
        for name in ["llama-bench-md", "llama-bench-json", "tok-s-lines", "auto"]:
            with self.assertRaises(ab_parsers.ParseError, msg=name):
                ab_parsers.get_parser(name)("segmentation fault\n")
        with self.assertRaises(ValueError):
            ab_parsers.get_parser("nope")
        with self.assertRaises(ValueError):
            ab_parsers.get_parser("regex:tg128=no group")

    def test_numbers_on_stderr_are_found(self):
        r = ab_parsers.parse_output(ab_parsers.parse_tok_s_lines, "hello\n", "tg128: 5 tok/s\n")
        self.assertEqual(r["tg128"].tok_s, 5.0)

    def test_thread_count_mismatch_is_refused(self):
        results = ab_parsers.parse_llama_bench_md(LLAMA_BENCH_CPU)  # threads = 2
        ab.check_threads("B", results, 2)
        with self.assertRaises(ab.HarnessError):
            ab.check_threads("B", results, 4)


class ArgvAndBoardTest(unittest.TestCase):
    def test_both_arms_are_pinned_alike(self):
        a = ab.build_argv("jitllm speed -m {model} -t {threads}", 2, "/m/my model.gguf", "0-1")
        b = ab.build_argv("llama-bench -m {model} -t {threads}", 2, "/m/my model.gguf", "0-1")
        self.assertEqual(a[:3], ["taskset", "-c", "0-1"])
        self.assertEqual(a[:3], b[:3])
        self.assertEqual(a[3:], ["jitllm", "speed", "-m", "/m/my model.gguf", "-t", "2"])
        self.assertEqual(b[-2:], ["-t", "2"])
        with self.assertRaises(ab.HarnessError):
            ab.build_argv("llama-bench -t 8", 2, None, None)  # hard-coded threads
        with self.assertRaises(ab.HarnessError):
            ab.build_argv("llama-bench -t {threads}", None, None, None)

    def test_board_rows(self):
        row = ["d", "m", "f (abc)", "h", "s", "tg128", "1", "2", "0.5", "0.01", "B faster|x"]
        self.assertEqual(ab_board.format_row(row).count("|"), len(ab_board.BOARD_COLUMNS) + 1)
        with self.assertRaises(ValueError):
            ab_board.format_row(row[:-1])
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "perf", "cpu.md")
            ab_board.append_rows(path, "cpu", [row])
            ab_board.append_rows(path, "cpu", [row])
            with open(path, encoding="utf-8") as f:
                text = f.read()
            self.assertEqual(text.count("| date |"), 1)  # header once
            self.assertEqual(text.count("| tg128 |"), 2)

    def test_sha256_prefix(self):
        with tempfile.NamedTemporaryFile(delete=False) as f:
            f.write(b"abc")
        try:
            # sha256("abc") from FIPS 180-2: ba7816bf8f01cfea...
            self.assertEqual(ab_board.sha256_prefix(f.name), "ba7816bf8f01")
        finally:
            os.unlink(f.name)


class QuietGuardTest(unittest.TestCase):
    STAT = ("cpu  900 0 300 5000 10 0 0 0 0 0\n"
            "cpu0 100 5 50 2000 3 1 2 0 0 0\n"
            "cpu1 400 0 100 1500 4 0 0 7 0 0\n"
            "cpu2 9 9 9 9 9 9 9 9 0 0\n"
            "intr 12345\n")

    def test_cpu_list_and_busy_columns(self):
        self.assertEqual(ab_quiet.parse_cpu_list("0-1,4"), {0, 1, 4})
        self.assertIsNone(ab_quiet.parse_cpu_list(None))
        # busy = user + nice + system + irq + softirq + steal (idle and iowait excluded):
        # cpu0 100+5+50+1+2+0 = 158, cpu1 400+0+100+0+0+7 = 507.
        self.assertEqual(ab_quiet.busy_jiffies(self.STAT, {0, 1}), (665, 2))
        self.assertEqual(ab_quiet.busy_jiffies(self.STAT, {1}), (507, 1))
        self.assertEqual(ab_quiet.busy_jiffies(self.STAT, None)[1], 3)  # the "cpu " total skipped

    def test_foreign_share(self):
        # 2 CPUs for 10 s = 20 CPU-s; 15 busy, 12 of them ours -> 3 / 20.
        self.assertAlmostEqual(ab_quiet.foreign_share(15.0, 12.0, 10.0, 2), 0.15)
        self.assertEqual(ab_quiet.foreign_share(5.0, 6.0, 10.0, 2), 0.0)  # clock skew: not < 0

    def test_busy_run_is_retried_and_quiet_one_kept(self):
        class Meter:  # scripted foreign shares, one per share() call
            def __init__(self, shares):
                self.shares = list(shares)

            def snapshot(self):
                return None

            def share(self, before, after):
                return self.shares.pop(0)

        runs = []
        arm = lambda: runs.append(1) or {"tg128": len(runs)}  # noqa: E731
        # wait window 0.5 (busy) -> 0.0 (quiet); run 1 at 0.3 (discarded); window 0.0; run 2 0.02.
        meter = Meter([0.5, 0.0, 0.3, 0.0, 0.02])
        logs = []
        guard = ab_quiet.QuietArm(arm, meter, 0.10, wait_s=60, window_s=0, log=logs.append,
                                  sleep=lambda s: None)
        self.assertEqual(guard(), {"tg128": 2})
        self.assertEqual(len(runs), 2)
        self.assertEqual(guard.shares, [0.02])
        self.assertTrue(any("discarded" in line for line in logs))
        # No retries left: a busy run is an error, not a silently kept number.
        guard = ab_quiet.QuietArm(arm, Meter([0.0, 0.9]), 0.10, window_s=0, retries=0,
                                  log=logs.append, sleep=lambda s: None, error=ValueError)
        with self.assertRaises(ValueError):
            guard()


class DryRunTest(unittest.TestCase):
    def test_dry_run_end_to_end(self):
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "cpu.md")
            proc = subprocess.run(
                [sys.executable, os.path.join(os.path.dirname(os.path.abspath(__file__)), "ab.py"),
                 "--dry-run", "--dry-run-noise", "0", "--dry-run-ratio", "1.05", "--threads", "1",
                 "--rounds", "2", "--aa-rounds", "2", "--out", out, "--build", "test"],
                capture_output=True, text=True, timeout=120)
            self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
            with open(out, encoding="utf-8") as f:
                text = f.read()
            rows = [line for line in text.splitlines() if "dry-run" in line]
            self.assertEqual(len(rows), 2)
            for line in rows:
                cells = [c.strip() for c in line.strip("|").split("|")]
                self.assertEqual(cells[8], "1.050")  # A/B
                self.assertTrue(cells[10].startswith("A faster"))


if __name__ == "__main__":
    unittest.main(verbosity=1)
