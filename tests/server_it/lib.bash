# Helpers shared by the jitllmd integration tests (sourced, not a test itself).
# Usage in a test: source "$(dirname "$0")/lib.bash" "$@"   ($1 = jitllmd, $2 = jitllm)
# Every server a test starts is killed on exit (trap); every request has a time limit.
set -euo pipefail
JITLLMD=${1:?usage: test.sh JITLLMD [JITLLM]}
JITLLM=${2:-}
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SHARED=${JITLLM_SHARED:-${JITLLM_SOURCE_DIR:-$HERE/../..}/../shared}
MODEL=$SHARED/oracle/pydoc-llama/pydoc-llama.Q8_0.gguf
[ -f "$MODEL" ] || { echo "missing fixture $MODEL (set JITLLM_SHARED)"; exit 1; }
WORK=$(mktemp -d)
SERVER_PIDS=()
cleanup() {
  for p in "${SERVER_PIDS[@]}"; do
    kill -9 "$p" 2>/dev/null || true
    wait "$p" 2>/dev/null || true
  done
  rm -rf "$WORK"
}
trap cleanup EXIT

fail() {
  echo "FAIL: $*" >&2
  for f in "$WORK"/*.log; do [ -f "$f" ] && { echo "--- $f" >&2; tail -20 "$f" >&2; }; done
  exit 1
}

# start_server NAME [jitllmd serve options...]: sets URL_<NAME>, PID_<NAME>; waits for /health ok.
start_server() {
  local name=$1
  shift
  "$JITLLMD" serve --host 127.0.0.1 --port 0 --port-file "$WORK/$name.port" "$@" \
    >"$WORK/$name.log" 2>&1 &
  local pid=$!
  SERVER_PIDS+=("$pid")
  printf -v "PID_$name" '%s' "$pid"
  local i
  for i in $(seq 1 300); do
    [ -s "$WORK/$name.port" ] && break
    kill -0 "$pid" 2>/dev/null || fail "server $name exited at start"
    sleep 0.1
  done
  [ -s "$WORK/$name.port" ] || fail "server $name did not bind in 30 s"
  local url="http://127.0.0.1:$(cat "$WORK/$name.port")"
  printf -v "URL_$name" '%s' "$url"
  for i in $(seq 1 300); do
    [ "$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 "$url/health")" = 200 ] && return 0
    sleep 0.1
  done
  fail "server $name not healthy in 30 s"
}

# post URL PATH JSON [curl args...]: prints the body, sets STATUS.
post() {
  local url=$1 path=$2 body=$3
  shift 3
  local out
  out=$(curl -s --max-time 120 -w '\n%{http_code}' -H 'Content-Type: application/json' \
    --data-binary "$body" "$@" "$url$path")
  STATUS=${out##*$'\n'}
  BODY=${out%$'\n'*}
}

# expect_error URL PATH JSON STATUS [jq check on .error]: an OpenAI-shaped error body.
expect_error() {
  local url=$1 path=$2 body=$3 status=$4 check=${5:-true}
  post "$url" "$path" "$body"
  [ "$STATUS" = "$status" ] || fail "$path $body: status $STATUS, expected $status: $BODY"
  echo "$BODY" | jq -e '(.error.message | type == "string" and length > 0) and
      (.error.type | type == "string") and (.error | has("code"))' >/dev/null ||
    fail "$path $body: not an error body: $BODY"
  echo "$BODY" | jq -e ".error | $check" >/dev/null || fail "$path $body: '$check' fails on $BODY"
}

metric() {  # metric URL NAME: the value of one series in /metrics (0 when absent)
  curl -s --max-time 10 "$1/metrics" | awk -v n="jitllm_$2" '$1 == n { print $2; f = 1 } END { if (!f) print 0 }'
}
