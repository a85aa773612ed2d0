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
# llama.cpp's attention flags: -fa (with or without a value), -ctk/-ctv, -s; what jitllm cannot
# do is refused with a message (exit 1), not accepted and ignored.
for f in "-fa" "-fa on" "--flash-attn auto" "-ctk f32 -ctv f32" "-ctk f16" "-s 7 --temp 1"; do
  OUT=$("$JITLLM" run $f -n 2 -p "A list is" 2>&1); RC=$?
  [ "$RC" = 0 ] || fail "$f: $RC $OUT"
done
OUT=$("$JITLLM" run -s 7 --temp 1 -n 2 -p "A list is" 2>&1)
echo "$OUT" | grep -q "^seed: 7$" || fail "-s is not the seed: $OUT"
for f in "-fa off:no unfused one" "-ctk q8_0:quantized KV cache is not supported" "-ctk f32:one type"; do
  OUT=$("$JITLLM" run ${f%%:*} -n 2 -p x 2>&1); RC=$?
  [ "$RC" = 1 ] && echo "$OUT" | grep -q "${f#*:}" || fail "${f%%:*}: $RC $OUT"
done
set -e
# -r/--reverse-prompt: the greedy text stops before the first place the stop text appears, and
# nothing of it is printed (also when it arrives split over tokens); an empty one is refused.
python3 - "$JITLLM" <<'PY'
import subprocess, sys
jitllm = sys.argv[1]
prompt = "A list is"
def run(*extra):
    r = subprocess.run([jitllm, "run", "-p", prompt, "-n", "48", "--temp", "0", "-t", "2", *extra],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith(prompt) and r.stdout.endswith("\n"), repr(r.stdout)
    return r.stdout[len(prompt):-1]
full = run()
assert len(full) > 40, repr(full)
for stop in (full[20:26], full[30:31], full[12:40]):
    got = run("-r", stop, "-r", "never in this text")
    want = full[:full.index(stop)]
    assert got == want, (stop, got, want)
PY
if "$JITLLM" run -p x -r "" 2> /dev/null; then fail "an empty -r was accepted"; fi
echo "flags: all checks passed"
