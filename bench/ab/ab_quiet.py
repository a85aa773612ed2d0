"""Foreign-load guard of the A/B harness: how much of the pinned CPUs' time went to processes
other than the arm being measured, and a wrapper that only keeps runs taken on a quiet machine.

Why: on a small shared box (the 2-core dev box, shared with other engineers' builds), one
compile during a run halves an arm's throughput; an A/A pair straddling it reads as 0.5, and
the harness (rightly) refuses the whole row. Measuring the foreign load around every run turns
that into a retried run and a logged reason instead of a refused row.

The foreign share of a run = (busy time of the pinned CPUs in /proc/stat - CPU time of our
finished child) / (wall time x number of pinned CPUs). Before each run the guard also waits for
a quiet one-second window. Linux only (/proc/stat); elsewhere the guard is off.
"""

import os
import time

# /proc/stat columns after the cpu name: user nice system idle iowait irq softirq steal ...
_BUSY_COLUMNS = (0, 1, 2, 5, 6, 7)


def parse_cpu_list(text):
    """'0-1,4' -> {0, 1, 4}; None or '' -> None (all CPUs)."""
    if not text:
        return None
    cpus = set()
    for part in text.split(","):
        part = part.strip()
        if "-" in part:
            lo, hi = part.split("-", 1)
            cpus.update(range(int(lo), int(hi) + 1))
        elif part:
            cpus.add(int(part))
    return cpus


def busy_jiffies(stat_text, cpus):
    """Sum of the busy columns of the per-CPU lines of /proc/stat text, for `cpus` (None: all)."""
    total, seen = 0, 0
    for line in stat_text.splitlines():
        if not line.startswith("cpu") or line.startswith("cpu "):
            continue
        name, *fields = line.split()
        cpu = int(name[3:])
        if cpus is not None and cpu not in cpus:
            continue
        values = [int(v) for v in fields]
        total += sum(values[i] for i in _BUSY_COLUMNS if i < len(values))
        seen += 1
    return total, seen


def foreign_share(busy_s, own_cpu_s, wall_s, n_cpus):
    """Share (0..1) of the CPUs' capacity over wall_s used by others than us."""
    if wall_s <= 0 or n_cpus <= 0:
        return 0.0
    return max(0.0, busy_s - own_cpu_s) / (wall_s * n_cpus)


class CpuMeter:
    """Snapshots of (busy seconds of the pinned CPUs, CPU seconds of our finished children,
    monotonic time)."""

    def __init__(self, cpus_text=None, stat_path="/proc/stat"):
        self.cpus = parse_cpu_list(cpus_text)
        self.stat_path = stat_path
        self.hz = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
        _, self.n_cpus = busy_jiffies(self._read(), self.cpus)
        if self.n_cpus == 0:
            raise OSError(f"{stat_path} lists none of the CPUs {cpus_text}")

    def _read(self):
        with open(self.stat_path, encoding="ascii") as f:
            return f.read()

    def snapshot(self):
        busy, _ = busy_jiffies(self._read(), self.cpus)
        t = os.times()
        return busy / self.hz, t.children_user + t.children_system, time.monotonic()

    def share(self, before, after):
        return foreign_share(after[0] - before[0], after[1] - before[1], after[2] - before[2],
                             self.n_cpus)


class QuietArm:
    """Runs `arm` only on a quiet machine: waits (up to wait_s) for a window of `window_s` with a
    foreign share <= max_share, runs, and retries the run (up to `retries` times over the whole
    harness) when others took more than max_share during it. `shares` keeps the accepted runs'
    foreign shares for the board."""

    def __init__(self, arm, meter, max_share=0.10, wait_s=1800.0, window_s=1.0, retries=20,
                 log=print, sleep=time.sleep, error=RuntimeError):
        self.arm, self.meter, self.max_share = arm, meter, max_share
        self.wait_s, self.window_s, self.retries = wait_s, window_s, retries
        self.log, self.sleep, self.error = log, sleep, error
        self.shares = []
        self.label = getattr(arm, "label", "?")

    def wait_quiet(self):
        deadline = time.monotonic() + self.wait_s
        waited = False
        while True:
            before = self.meter.snapshot()
            self.sleep(self.window_s)
            share = self.meter.share(before, self.meter.snapshot())
            if share <= self.max_share:
                if waited:
                    self.log(f"  machine quiet again ({share:.0%} foreign)")
                return
            if not waited:
                self.log(f"  waiting for a quiet machine: others use {share:.0%} of the pinned "
                         f"CPUs (limit {self.max_share:.0%})")
                waited = True
            if time.monotonic() > deadline:
                raise self.error(f"the machine stayed busy for {self.wait_s:.0f} s (others use "
                                 f"{share:.0%} of the pinned CPUs > {self.max_share:.0%}); "
                                 f"nothing measured")

    def __call__(self):
        while True:
            self.wait_quiet()
            before = self.meter.snapshot()
            results = self.arm()
            share = self.meter.share(before, self.meter.snapshot())
            if share <= self.max_share:
                self.shares.append(share)
                return results
            if self.retries <= 0:
                raise self.error(f"arm {self.label}: other processes used {share:.0%} of the "
                                 f"pinned CPUs during the run and no retries are left")
            self.retries -= 1
            self.log(f"  arm {self.label}: run discarded, other processes used {share:.0%} of "
                     f"the pinned CPUs during it (limit {self.max_share:.0%}); retrying")
