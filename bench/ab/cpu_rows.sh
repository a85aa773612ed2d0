#!/usr/bin/env bash
# The CPU board's rows in one command: jitllm (A) against llama.cpp's llama-bench (B) on the
# synthetic Llama-3.2-1B Q4_K_M and Q8_0, pp512 and tg128, both arms under `taskset -c CPUS`
# with THREADS threads, through bench/ab/ab.py (A/A self-control, ABBA rounds, refusal above
# 0.10 IQR/median, runs retried when other processes load the pinned CPUs). Accepted rows are
# appended to docs/perf/cpu.md. Usage (from anywhere):
#   bench/ab/cpu_rows.sh [JITLLM_BINARY]
# Environment: LLAMA_BIN (llama.cpp's build/bin), MODELS (dir of the two GGUFs), CPUS (0-1),
# THREADS (2), ROUNDS (6), AA_ROUNDS (4), EXTRA (more ab.py flags, e.g. --out /tmp/x.md),
# PEER_FLAGS (more llama-bench flags; e.g. "-C 0x3 --cpu-strict 1" pins its threads one per CPU
# as jitllm does inside the taskset; by default they float there, llama.cpp's own default).
# Exit status: 0 all rows written, else the worst of ab.py's (2 rows refused, 3 A/A refused).
set -uo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
JITLLM="${1:-$REPO/build/release/jitllm}"
LLAMA_BIN="${LLAMA_BIN:-/work/peers/llama.cpp/build/bin}"
MODELS="${MODELS:-/work/models}"
CPUS="${CPUS:-0-1}"
THREADS="${THREADS:-2}"
[ -x "$JITLLM" ] || { echo "cpu_rows: no jitllm binary at $JITLLM (pass its path)" >&2; exit 1; }
[ -x "$LLAMA_BIN/llama-bench" ] || { echo "cpu_rows: no llama-bench in $LLAMA_BIN" >&2; exit 1; }
status=0
for fmt in Q4_K_M Q8_0; do
  model="$MODELS/synth-llama-3.2-1b.$fmt.gguf"
  [ -f "$model" ] || { echo "cpu_rows: no model $model" >&2; exit 1; }
  # shellcheck disable=SC2086
  python3 "$HERE/ab.py" --backend cpu --cpus "$CPUS" --threads "$THREADS" --model "$model" \
    --metrics pp512,tg128 --rounds "${ROUNDS:-6}" --aa-rounds "${AA_ROUNDS:-4}" \
    --a "$JITLLM speed -m {model} -t {threads} -p 512 -n 128 -r 1" --a-parser tok-s-lines \
    --b "env LD_LIBRARY_PATH=$LLAMA_BIN $LLAMA_BIN/llama-bench -m {model} -t {threads} -p 512 -n 128 -r 1 ${PEER_FLAGS:-}" \
    --b-parser llama-bench-md ${EXTRA:-}
  rc=$?
  [ $rc -gt $status ] && status=$rc
done
exit $status
