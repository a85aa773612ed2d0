#!/usr/bin/env bash
# End-to-end test of `jitllm decide` on its own: the executable carries no server code (no
# jitllm::server or httplib symbols; System One comes from src/app), answers yes/no, choice and
# score questions about a state (probabilities that sum to one, no cache), the same output twice,
# and errors as one clear line with exit status 1 (no question, a malformed --choice, a state
# longer than the context). tests/server_it/decide.sh checks it answers as /v1/systemone does.
set -euo pipefail
JITLLM="$1"
ORACLE="${JITLLM_SHARED:-${JITLLM_SOURCE_DIR:-$(dirname "$0")/../..}/../shared}/oracle"
MODEL="$ORACLE/pydoc-llama/pydoc-llama.Q8_0.gguf"
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
export XDG_CACHE_HOME="$TMP/cache"

# 1. No server layer in the binary (and nm sees its symbols at all: app's are there).
nm -C "$JITLLM" > "$TMP/syms"
grep -q 'jitllm::app::evaluate_systemone' "$TMP/syms" || fail "nm shows no jitllm::app symbols"
if grep -E 'jitllm::server::|httplib::' "$TMP/syms" | head -3 | grep .; then
  fail "jitllm links server code"
fi

# 2. Three kinds of question about one state.
STATE="The open() function returns a file object. Files should be closed after use."
decide() {
  "$JITLLM" decide -m "$MODEL" --state "$STATE" --noul "Should files be closed after use?" \
    --choice "What does open() return?|file object,list,string" --score "How clear is the text?" \
    --kernels reference
}
decide > "$TMP/a.json" 2> "$TMP/a.log" || fail "decide: $(cat "$TMP/a.log")"
jq -e '.model == "pydoc-llama.Q8_0" and .object == "systemone.answers" and
  .answers.q1.type == "noul" and (.answers.q1.p_yes | . >= 0 and . <= 1) and
  (.answers.q1.answer == "yes" or .answers.q1.answer == "no") and
  .answers.q2.type == "choice" and (.answers.q2.distribution | length == 3) and
  (.answers.q2.distribution | add | . > 0.999999 and . < 1.000001) and
  .answers.q3.type == "score" and (.answers.q3.distribution | length == 5) and
  (.answers.q3.expected | . >= 1 and . <= 5) and
  .usage.cached_tokens == 0 and .usage.tokens_evaluated > 0 and .usage.prompt_tokens > 0' \
  "$TMP/a.json" > /dev/null || fail "decide output: $(cat "$TMP/a.json")"
# 3. Nothing is kept between runs and nothing depends on timing: the same JSON again.
decide > "$TMP/b.json" 2> /dev/null || fail "second decide"
cmp -s "$TMP/a.json" "$TMP/b.json" || fail "two runs differ: $(diff "$TMP/a.json" "$TMP/b.json")"

# 4. Errors: one line, exit status 1.
expect_error() {  # expect_error WANT_TEXT ARGS...
  local want="$1"; shift
  local rc=0
  "$JITLLM" decide -m "$MODEL" "$@" > /dev/null 2> "$TMP/err.txt" || rc=$?
  [ "$rc" = 1 ] || fail "decide $*: exit status $rc, expected 1 ($(cat "$TMP/err.txt"))"
  grep -q "$want" "$TMP/err.txt" || fail "decide $*: unclear error: $(cat "$TMP/err.txt")"
}
expect_error "no question" --state "$STATE"
expect_error "expected 'QUESTION|label1,label2,...'" --state "$STATE" --choice "no bar here"
expect_error "between 2 and 32 options" --state "$STATE" --choice "Which?|only"
LONG=$(printf 'the function returns %.0s' $(seq 1 300))
expect_error "more than the context" --state "$LONG" --noul "ok?"
echo "decide: P(yes) $(jq '.answers.q1.p_yes' "$TMP/a.json"), no server code linked"
