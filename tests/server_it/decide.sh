#!/usr/bin/env bash
# `jitllm decide` answers like POST /v1/systemone (same prompts and scoring): the same question
# about the same state gives the same P(yes) both ways. Usage: decide.sh JITLLMD JITLLM
source "$(dirname "$0")/lib.bash" "$@"
[ -n "$JITLLM" ] || fail "needs the jitllm path as \$2"
STATE="The open() function returns a file object. Files should be closed after use."
Q="Should files be closed after use?"
"$JITLLM" decide -m "$MODEL" --state "$STATE" --noul "$Q" --choice "What does open() return?|file object,list" \
  >"$WORK/decide.json" 2>"$WORK/decide.log" || fail "jitllm decide: $(cat "$WORK/decide.log")"
jq -e '.answers.q1.type == "noul" and (.answers.q1.p_yes | . >= 0 and . <= 1) and
  (.answers.q2.distribution | add | . > 0.999999 and . < 1.000001)' "$WORK/decide.json" >/dev/null ||
  fail "decide output: $(cat "$WORK/decide.json")"
start_server D --model "$MODEL" --alias pydoc
# The same two questions as the CLI, so both run the same steps (kernels need not be
# batch-invariant: the AMX tiles are not).
post "$URL_D" /v1/systemone "$(jq -nc --arg s "$STATE" --arg q "$Q" \
  '{state:$s,questions:{q1:{type:"noul",instructions:$q},
    q2:{type:"choice",instructions:"What does open() return?",choices:["file object","list"]}}}')"
[ "$STATUS" = 200 ] || fail "systemone: $BODY"
CLI=$(jq '.answers.q1.p_yes' "$WORK/decide.json")
HTTP=$(echo "$BODY" | jq '.answers.q1.p_yes')
awk -v a="$CLI" -v b="$HTTP" 'BEGIN { d = a - b; if (d < 0) d = -d; m = a > b ? a : b;
  exit !(d <= 1e-4 * (m > 1e-30 ? m : 1) || d < 1e-12) }' || fail "P(yes) CLI $CLI != HTTP $HTTP"
# Errors are one clear line, exit status 1.
if "$JITLLM" decide -m "$MODEL" --state "$STATE" 2>"$WORK/err.txt"; then fail "no question accepted"; fi
grep -q "no question" "$WORK/err.txt" || fail "unclear error: $(cat "$WORK/err.txt")"
echo "decide: CLI P(yes) $CLI == HTTP $HTTP"
