#!/usr/bin/env bash
# `jitllm models` and `jitllm cache clean` over a cache of their own: conversions made by loading
# Hugging Face folders (copies of the bundled demo model), one current, one whose source changed,
# one whose source is gone, one damaged; a kernel directory; --stale, --models, --kernels,
# --dry-run, and everything.
set -euo pipefail
JITLLM="$1"
DEMO="$(cd "$(dirname "$0")/../../models/demo" && pwd)"
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
export XDG_CACHE_HOME="$TMP/cache"
CACHE="$XDG_CACHE_HOME/jitllm"
state() { "$JITLLM" models --json | jq -r --arg n "$1" '.models[] | select(.name == $n) | .state'; }

"$JITLLM" models | grep -q "no converted models" || fail "empty cache: $("$JITLLM" models)"
for m in current changed gone damaged; do
  cp -r "$DEMO" "$TMP/$m"
  "$JITLLM" run -m "$TMP/$m" -p hi -n 1 > /dev/null 2>&1 || fail "run on $m"
done
echo >> "$TMP/changed/config.json"
rm -rf "$TMP/gone"
damaged=$(ls "$CACHE"/damaged-*.jlm)
head -c 5000 "$damaged" > "$TMP/cut" && cat "$TMP/cut" > "$damaged"
mkdir -p "$CACHE/cuda/sm_90" && head -c 3000 /dev/zero > "$CACHE/cuda/sm_90/k.cubin"

[ "$(state current)" = current ] || fail "current: $(state current)"
[ "$(state changed)" = stale ] || fail "changed: $(state changed)"
[ "$(state gone)" = source_gone ] || fail "gone: $(state gone)"
# A damaged file has no readable name: it is listed by path.
"$JITLLM" models --json | jq -e '[.models[] | select(.state == "unreadable")] | length == 1' > /dev/null ||
  fail "damaged: $("$JITLLM" models --json)"
"$JITLLM" models --json | jq -e '.kernels.files == 1 and .kernels.bytes == 3000' > /dev/null || fail "kernels"
"$JITLLM" models | grep -q "current .*current-[0-9a-f]*.jlm" || fail "text listing: $("$JITLLM" models)"
"$JITLLM" models | grep -q "from $TMP/changed" || fail "no source in the text listing"

# --stale --dry-run removes nothing; --stale removes the three that are not current.
"$JITLLM" cache clean --stale --dry-run | grep -c "^would remove" | grep -qx 3 || fail "dry run"
[ "$("$JITLLM" models --json | jq '.models | length')" = 4 ] || fail "dry run removed something"
"$JITLLM" cache clean --stale > "$TMP/clean.out"
[ "$("$JITLLM" models --json | jq -r '[.models[].state] | join(",")')" = current ] ||
  fail "after --stale: $("$JITLLM" models --json)"
[ -d "$CACHE/cuda" ] || fail "--stale removed the kernels"
# --kernels only the kernel cache; then everything.
"$JITLLM" cache clean --kernels > /dev/null
[ ! -e "$CACHE/cuda" ] && [ "$(state current)" = current ] || fail "--kernels"
"$JITLLM" cache clean | grep -q "^freed" || fail "clean all"
[ "$("$JITLLM" models --json | jq '.models | length')" = 0 ] || fail "models left after clean"
# The model still runs: the loader converts it again.
"$JITLLM" run -m "$TMP/current" -p hi -n 1 > /dev/null 2>&1 || fail "run after clean"
if "$JITLLM" cache clean --models --kernels 2> "$TMP/err"; then fail "--models --kernels accepted"; fi
echo "models_cache: ok"
