#!/usr/bin/env bash
# End-to-end test of `jitllm eval` and `jitllm run` against llama.cpp's outputs in the oracle:
# eval's logits file equals llama.cpp's prompt logits (F32 fixture, reference kernels), run's
# greedy ids on pydoc-llama equal llama.cpp's 32, the speed line and errors (one clear line,
# non-zero exit: missing model, bad ids, context overflow, no prompt).
set -euo pipefail
JITLLM="$1"
ORACLE="${JITLLM_SHARED:-${JITLLM_SOURCE_DIR:-$(dirname "$0")/../..}/../shared}/oracle"
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
export XDG_CACHE_HOME="$TMP/cache"

# 1. eval: logits of every position, compared with llama.cpp's (max |diff| <= 2e-3 for F32).
FOX="1 450 439 293 110 289 307 122 113 285 114 123"
"$JITLLM" eval -m "$ORACLE/models/synth-llama.F32.gguf" --ids "$FOX" --logits "$TMP/fox.f32" \
  --kernels reference > "$TMP/eval.out"
grep -q "top-5 of position 11" "$TMP/eval.out" || fail "eval prints no top-5"
# llama.cpp's greedy choice after this prompt is its first greedy id.
first=$(jq '.greedy_ids[0]' "$ORACLE/logits/synth-llama.F32.fox.json")
[ "$(sed -n 2p "$TMP/eval.out" | awk '{print $1}')" = "$first" ] || fail "eval top-1 is not $first"
python3 - "$TMP/fox.f32" "$ORACLE/logits/synth-llama.F32.fox.logits.f32" <<'PY'
import array, sys
a, b = array.array('f'), array.array('f')
a.frombytes(open(sys.argv[1], 'rb').read()); b.frombytes(open(sys.argv[2], 'rb').read())
assert len(a) == len(b) == 12 * 512, (len(a), len(b))
d = max(abs(x - y) for x, y in zip(a, b))
print(f"eval vs llama.cpp: max |diff| {d:.3g}")
assert d <= 2e-3, d
PY

# 2. run: greedy text + ids on the trained pydoc-llama equal llama.cpp's 32 ids.
REF="$ORACLE/pydoc-llama/llamacpp/F32.function.json"
"$JITLLM" run -m "$ORACLE/pydoc-llama/pydoc-llama.F32.gguf" -p "$(jq -r .prompt "$REF")" -n 32 \
  --temp 0 --ids -t 2 > "$TMP/run.out" 2> "$TMP/run.err"
want=$(jq -r '.greedy_ids | map(tostring) | join(" ")' "$REF")
[ "$(tail -n 1 "$TMP/run.out")" = "$want" ] || fail "run ids differ: $(tail -n 1 "$TMP/run.out") vs $want"
head -c 20 "$TMP/run.out" | grep -q "^The function returns" || fail "run does not echo the prompt"
grep -q "generation: 32 tokens" "$TMP/run.err" || fail "no speed line: $(cat "$TMP/run.err")"
grep -q "tok/s" "$TMP/run.err" || fail "no tok/s"

# 3. Errors: one line, non-zero exit.
# 3. The default kernels (generated for this CPU) give llama.cpp's greedy ids for every pydoc-llama
#    format and prompt: near-ties (Q8_0 parts from F32 at token 2 of "function") expose any
#    kernel whose float order differs from llama.cpp's.
for fmt in F32 F16 Q8_0; do
  for p in function list module thread; do
    REF="$ORACLE/pydoc-llama/llamacpp/$fmt.$p.json"
    got=$("$JITLLM" run -m "$ORACLE/pydoc-llama/pydoc-llama.$fmt.gguf" -p "$(jq -r .prompt "$REF")" \
      -n 32 --temp 0 --ids -t 2 2> /dev/null | tail -n 1)
    want=$(jq -r '.greedy_ids | map(tostring) | join(" ")' "$REF")
    [ "$got" = "$want" ] || fail "$fmt $p: default-kernel ids $got, llama.cpp $want"
  done
done

expect_error() {  # expect_error PATTERN ARGS...
  local pattern="$1"; shift
  if "$JITLLM" "$@" > "$TMP/err.out" 2> "$TMP/err.err"; then fail "succeeded: $*"; fi
  grep -q "$pattern" "$TMP/err.err" || fail "no '$pattern' in: $(cat "$TMP/err.err")"
  [ "$(wc -l < "$TMP/err.err")" -eq 1 ] || fail "error is not one line: $(cat "$TMP/err.err")"
}
expect_error "no such file" run -m "$TMP/missing.gguf" -p hi
expect_error "not a token id" eval -m "$ORACLE/models/synth-llama.F32.gguf" --ids "1 x 3"
expect_error "out of range" eval -m "$ORACLE/models/synth-llama.F32.gguf" --ids "1 512"
expect_error "context" run -m "$ORACLE/pydoc-llama/pydoc-llama.F32.gguf" -p "$(printf 'word %.0s' {1..40})" -c 16
expect_error "no prompt" run -m "$ORACLE/pydoc-llama/pydoc-llama.F32.gguf"
JITLLM_DEFAULT_MODEL="$TMP/nothing-here" expect_error "default model" run -p hi
echo "run_eval: ok"
