"""The perf board: facts about the run (machine, model hash, build) and the markdown rows appended
to docs/perf/<backend>.md. Reads /proc/cpuinfo, nvidia-smi and git; runs no benchmark.
"""

import datetime
import hashlib
import os
import shutil
import subprocess

BOARD_COLUMNS = ["date", "machine", "model (sha256)", "build", "setup", "metric", "A tok/s",
                 "B tok/s", "A/B", "IQR/med", "verdict"]


def cpu_description(cpus=None):
    model = "unknown CPU"
    n = 0
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                key, _, value = line.partition(":")
                key = key.strip()
                if key == "model name" and model == "unknown CPU":
                    model = value.strip()
                elif key == "processor":
                    n += 1
    except OSError:
        pass
    text = f"{model}, {n} cpus" if n else model
    if cpus:
        text += f", pinned {cpus}"
    return text


def gpu_description():
    """'1x NVIDIA H200' style summary from nvidia-smi, or None when there is none."""
    if not shutil.which("nvidia-smi"):
        return None
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=30, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    names = [n.strip() for n in out.splitlines() if n.strip()]
    if not names:
        return None
    counts = {}
    for n in names:
        counts[n] = counts.get(n, 0) + 1
    return ", ".join(f"{c}x {n}" for n, c in counts.items())


def machine_description(backend, cpus=None):
    if backend != "cpu":
        gpu = gpu_description()
        if gpu:
            return gpu + "; " + cpu_description(cpus)
    return cpu_description(cpus)


def sha256_prefix(path, n=12):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while True:
            block = f.read(1 << 22)
            if not block:
                break
            h.update(block)
    return h.hexdigest()[:n]


def build_hash(repo_dir):
    """Short HEAD hash of the repository, '+dirty' when tracked files differ from it."""
    try:
        head = subprocess.run(["git", "-C", repo_dir, "rev-parse", "--short=10", "HEAD"],
                              capture_output=True, text=True, timeout=30, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", repo_dir, "diff", "--quiet", "HEAD", "--"],
                               capture_output=True, timeout=60).returncode != 0
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return head + ("+dirty" if dirty else "")


def _cell(text):
    return str(text).replace("|", "/").replace("\n", " ")


def format_row(values):
    if len(values) != len(BOARD_COLUMNS):
        raise ValueError(f"row has {len(values)} cells, board has {len(BOARD_COLUMNS)} columns")
    return "| " + " | ".join(_cell(v) for v in values) + " |"


def board_header(backend):
    return (f"# Paired A/B measurements: {backend}\n\n"
            "Appended by `bench/ab/ab.py` (protocol: `docs/perf/README.md`). A = jitllm, B = the "
            "peer; A/B is the median over rounds of per-round throughput ratios, so > 1 means "
            "jitllm is faster.\n\n"
            + format_row(BOARD_COLUMNS) + "\n"
            + "|" + "|".join("---" for _ in BOARD_COLUMNS) + "|\n")


def append_rows(path, backend, rows):
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    new = not os.path.exists(path) or os.path.getsize(path) == 0
    with open(path, "a", encoding="utf-8") as f:
        if new:
            f.write(board_header(backend))
        for row in rows:
            f.write(format_row(row) + "\n")


def today():
    return datetime.datetime.now().strftime("%Y-%m-%d %H:%M")
