#!/usr/bin/env bash
# --models-dir DIR serves every .gguf there by file stem (first is the default) and skips a file that
# does not load; a --model that fails ends the process with exit 1 and the reason.
# Usage: models_dir.sh JITLLMD
source "$(dirname "$0")/lib.bash" "$@"
DIR=$(dirname "$MODEL")
start_server M --models-dir "$DIR"
IDS=$(curl -s --max-time 10 "$URL_M/v1/models" | jq -c '[.data[].id] | sort')
[ "$IDS" = '["pydoc-llama.F16","pydoc-llama.F32","pydoc-llama.Q8_0"]' ] || fail "models: $IDS"
for id in pydoc-llama.F32 pydoc-llama.Q8_0; do
  post "$URL_M" /v1/completions "{\"model\":\"$id\",\"prompt\":\"A list is\",\"max_tokens\":4,\"temperature\":0}"
  [ "$STATUS" = 200 ] && echo "$BODY" | jq -e --arg m "$id" '.model == $m' >/dev/null || fail "$id: $BODY"
done

# A model that cannot load, a bad --kernels, --devices cuda without a card: the process exits 1
# with the reason instead of staying up to answer 503.
expect_load_failure() {
  local what=$1
  shift
  set +e
  timeout 60 "$JITLLMD" serve --port 0 "$@" >"$WORK/bad.log" 2>&1
  local rc=$?
  set -e
  [ "$rc" = 1 ] || fail "$what: exit $rc, want 1"
  grep -q "$what" "$WORK/bad.log" || fail "$what: the reason is not given: $(tail -3 "$WORK/bad.log")"
}
expect_load_failure missing.gguf --model "$WORK/missing.gguf"
expect_load_failure bogus --model "$MODEL" --kernels bogus
expect_load_failure missing.jinja --model "$MODEL" --chat-template "$WORK/missing.jinja"
if ! command -v nvidia-smi >/dev/null || ! nvidia-smi -L >/dev/null 2>&1; then
  expect_load_failure cuda --model "$MODEL" --devices cuda
fi

# --models-dir DIR with a truncated file: that one is skipped with a log line, the rest served.
mkdir "$WORK/dir"
ln -s "$MODEL" "$WORK/dir/good.gguf"
head -c 100000 "$MODEL" >"$WORK/dir/broken.gguf"
ln -s loop.gguf "$WORK/dir/loop.gguf"  # a link to itself: its status call fails (the server exited 1)
start_server T --models-dir "$WORK/dir"
IDS=$(curl -s --max-time 10 "$URL_T/v1/models" | jq -c '[.data[].id]')
[ "$IDS" = '["good"]' ] || fail "models with a broken file: $IDS"
grep -q "broken.gguf: skipped" "$WORK/T.log" || fail "the skipped file is not logged"
grep -q "skipping .*loop.gguf" "$WORK/T.log" || fail "the link loop is not logged as skipped"
echo "models_dir: 3 models served, failed loads exit 1, a broken file in --models-dir is skipped"
