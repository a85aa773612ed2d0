#!/usr/bin/env bash
# End-to-end test of `jitllm batched` (N sessions decoding together) on the synthetic Q4_K_M
# fixture, on the CPU: one throughput line and one bytes-per-step line per session count, and
# clear errors for bad counts.
set -euo pipefail
JITLLM="$1"
ORACLE="${JITLLM_SHARED:-${JITLLM_SOURCE_DIR:-$(dirname "$0")/../..}/../shared}/oracle"
M="$ORACLE/models/synth-llama.Q4_K_M.gguf"
fail() { echo "FAIL: $*" >&2; exit 1; }

out="$("$JITLLM" batched -m "$M" -s 1,3 -p 3 -n 4 --devices cpu)"
[ "$(grep -c '^sessions ' <<< "$out")" = 2 ] || fail "expected 2 result lines, got: $out"
grep -Eq '^sessions +1: +[0-9.]+ tok/s total' <<< "$out" || fail "no line for 1 session: $out"
grep -Eq '^sessions +3: +[0-9.]+ tok/s total' <<< "$out" || fail "no line for 3 sessions: $out"
# Each count's bytes per step (weights once, the sessions' K/V) against the measured read wall.
[ "$(grep -Ec '^  a step reads [0-9.]+ MB weights \+ [0-9.]+ MB KV: [0-9.]+ GB/s = [0-9]+% of the [0-9.]+ GB/s read wall' <<< "$out")" = 2 ] ||
  fail "expected 2 bytes-per-step lines, got: $out"

expect_error() {  # expect_error MESSAGE args...
  local msg="$1"; shift
  local err
  if err="$("$JITLLM" batched -m "$M" "$@" 2>&1)"; then fail "batched $* succeeded"; fi
  grep -qF -- "$msg" <<< "$err" || fail "batched $*: expected '$msg' in: $err"
}
expect_error "session count 0 must be positive" -s 0
expect_error "'x' is not a session count" -s 2,x
expect_error "-p and -n must be at least 1" -n 0
echo "batched: ok"
