#!/usr/bin/env bash
# Structured output end to end on the bundled model: tests/server_it/structured_output.py (50
# schemas at temperature 1 validated by python3-jsonschema, json_object, GBNF and json_schema
# on /v1/completions, a streamed constrained chat, n = 3, refusals with 400).
# Usage: structured_output.sh JITLLMD [JITLLM]
source "$(dirname "$0")/lib.bash" "$@"
python3 -c 'import jsonschema' 2>/dev/null || { echo "skipped: python3-jsonschema is not installed"; exit 77; }
start_server S
python3 "$HERE/structured_output.py" "$URL_S" || fail "structured output"
echo "structured_output: ok"
