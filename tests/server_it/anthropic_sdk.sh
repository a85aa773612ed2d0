#!/usr/bin/env bash
# Runs anthropic_sdk.mjs (the official Anthropic Node SDK) against jitllmd's /v1/messages.
# Skipped (exit 77) when Node or the SDK is not installed: scripts/setup-deps installs both
# (npm ci here). --deterministic: the greedy create == stream comparisons hold whatever the
# prefix cache reuses.
# Usage: anthropic_sdk.sh JITLLMD
source "$(dirname "$0")/lib.bash" "$@"
command -v node >/dev/null || { echo "SKIP: node is not installed"; exit 77; }
[ -f "$HERE/node_modules/@anthropic-ai/sdk/package.json" ] ||
  { echo "SKIP: run 'npm ci --prefix tests/server_it' (scripts/setup-deps does)"; exit 77; }
start_server S --model "$MODEL" --alias pydoc --parallel 2 --deterministic
start_server K --model "$MODEL" --alias pydoc --api-key s3cret
timeout 120 node "$HERE/anthropic_sdk.mjs" "$URL_S" "$URL_K" || fail "anthropic SDK checks"
