#!/usr/bin/env bash
# jitllm's command line as users of llama.cpp type it: --version names the commit, -ngl is
# --gpu-layers (not "-n gl"), a mistyped command or flag gets the nearest name and exit 2.
# Usage: flags.sh JITLLM
set -euo pipefail
JITLLM=${1:?usage: flags.sh JITLLM}
fail() { echo "FAIL: $*" >&2; exit 1; }

"$JITLLM" --version | grep -Eq '^jitllm [0-9.]+ \(commit [0-9a-f]+' || fail "--version: $("$JITLLM" --version)"
OUT=$("$JITLLM" run -ngl 0 -n 2 -p "A list is" --temp 0 2>&1) || fail "-ngl: $OUT"
set +e
OUT=$("$JITLLM" rn -p x 2>&1); RC=$?
[ "$RC" = 2 ] && echo "$OUT" | grep -q "did you mean run" || fail "mistyped command: $RC $OUT"
OUT=$("$JITLLM" run --n-predcit 3 -p x 2>&1); RC=$?
[ "$RC" = 2 ] && echo "$OUT" | grep -q "did you mean --n-predict" || fail "mistyped flag: $RC $OUT"
set -e
echo "flags: all checks passed"
