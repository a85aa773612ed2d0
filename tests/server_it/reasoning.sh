#!/usr/bin/env bash
# Reasoning separation end to end on the bundled demo model (it does not think by itself: a
# grammar makes it write a thought and an answer, and max_tokens cuts it inside the thinking).
# QwQ's template opens <think> in the generation prompt: reasoning_content and content, whole ==
# streamed, reasoning_format none (server flag and request) == the raw text, max_tokens inside
# the thinking, /v1/responses' reasoning item and /v1/messages' thinking block (whole and
# streamed). Qwen3's:
# chat_template_kwargs and reasoning_effort none reach the template.
# gpt-oss (token_model.py: the demo with harmony's control tokens): analysis and final,
# streamed, a required tool call, <|end|> inside the output, reasoning_effort, the history's
# reasoning_content. Usage: reasoning.sh JITLLMD [JITLLM]
source "$(dirname "$0")/lib.bash" "$@"
export XDG_CACHE_HOME=$WORK/cache  # the demo folders are converted into it once
T=$SHARED/oracle/templates
DEMO="${JITLLM_SOURCE_DIR:-$HERE/../..}/models/demo"
start_server Q --chat-template "$T/Qwen-QwQ-32B.jinja"
start_server N --chat-template "$T/Qwen-QwQ-32B.jinja" --reasoning-format none
grep -q "the template thinks (<think>); reasoning format auto" "$WORK/Q.log" || fail "thinking not logged"

# stream URL BODY: the streamed chunks' reasoning and content, joined, as {"reasoning", "content"}.
stream() {
  curl -sN --max-time 120 -H 'Content-Type: application/json' --data-binary "$2" \
    "$1/v1/chat/completions" | sed -n 's/^data: //p' | grep -v '^\[DONE\]$' |
    jq -s '{reasoning: (map(.choices[0].delta.reasoning_content // "") | add),
            content: (map(.choices[0].delta.content // "") | add),
            calls: (map(.choices[0].delta.tool_calls // []) | add)}'
}
squash() { tr -d ' \n'; }

HI='"messages":[{"role":"user","content":"Why is the sky blue?"}],"temperature":0'
# The output starts inside the thinking: a thought, </think>, an answer.
G='"grammar":"root ::= [a-z ]{8,40} \"</think>\" [a-z ]{8,40}","max_tokens":120'
post "$URL_Q" /v1/chat/completions "{$HI,$G}"
[ "$STATUS" = 200 ] || fail "QwQ: $STATUS $BODY"
R=$(echo "$BODY" | jq -r '.choices[0].message.reasoning_content')
C=$(echo "$BODY" | jq -r '.choices[0].message.content')
[ -n "$R" ] && [ "$R" != null ] && [ -n "$C" ] && [ "$C" != null ] || fail "not split: $BODY"
case "$R$C" in *think*) fail "a tag was left in: $BODY" ;; esac
S=$(stream "$URL_Q" "{$HI,$G,\"stream\":true}")
[ "$(echo "$S" | jq -r .reasoning)" = "$R" ] || fail "streamed reasoning differs: $S vs $R"
[ "$(echo "$S" | jq -r .content)" = "$C" ] || fail "streamed content differs: $S vs $C"
# none keeps the thinking in the content: the same text, with its tag.
for req in "$URL_N {$HI,$G}" "$URL_Q {$HI,$G,\"reasoning_format\":\"none\"}"; do
  post ${req%% *} /v1/chat/completions "${req#* }"
  [ "$(echo "$BODY" | jq -r '.choices[0].message | has("reasoning_content")')" = false ] || fail "none separated: $BODY"
  [ "$(echo "$BODY" | jq -r '.choices[0].message.content' | squash)" = "$(printf '%s</think>%s' "$R" "$C" | squash)" ] ||
    fail "none is not the raw text: $BODY"
done
post "$URL_N" /v1/chat/completions "{$HI,$G,\"reasoning_format\":\"deepseek\"}"
[ "$(echo "$BODY" | jq -r '.choices[0].message.reasoning_content')" = "$R" ] || fail "deepseek on a none server: $BODY"
# A grammar of the whole output (response_format) is the answer, not the rest of the thinking.
post "$URL_Q" /v1/chat/completions "{$HI,\"max_tokens\":60,\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"name\":\"a\",\"schema\":{\"type\":\"object\",\"properties\":{\"ok\":{\"type\":\"boolean\"}},\"required\":[\"ok\"],\"additionalProperties\":false}}}}"
echo "$BODY" | jq -e '.choices[0].message | (has("reasoning_content") | not) and (.content | fromjson | .ok | type == "boolean")' >/dev/null ||
  fail "response_format under an opened thinking: $BODY"
# max_tokens inside the thinking: all reasoning, no content.
post "$URL_Q" /v1/chat/completions "{$HI,\"max_tokens\":6}"
echo "$BODY" | jq -e '.choices[0] | .finish_reason == "length" and .message.content == "" and
  (.message.reasoning_content | length > 0)' >/dev/null || fail "cut thinking: $BODY"
R6=$(echo "$BODY" | jq -r '.choices[0].message.reasoning_content')
S=$(stream "$URL_Q" "{$HI,\"max_tokens\":6,\"stream\":true}")
[ "$(echo "$S" | jq -r .reasoning)" = "$R6" ] || fail "cut thinking streamed: $S"
expect_error "$URL_Q" /v1/chat/completions "{$HI,\"reasoning_effort\":\"high\"}" 400 '.param == "reasoning_effort"'
# /v1/responses: the reasoning is a reasoning item (here cut by max_output_tokens: incomplete,
# no message), the same text as the chat route's, streamed as reasoning_text deltas.
post "$URL_Q" /v1/responses '{"input":"Why is the sky blue?","temperature":0,"max_output_tokens":6}'
echo "$BODY" | jq -e --arg r "$R6" '.status == "incomplete" and (.output | length) == 1 and
  .output[0].type == "reasoning" and .output[0].content[0].text == $r and
  .usage.output_tokens_details.reasoning_tokens > 0' >/dev/null || fail "responses reasoning: $BODY"
SR=$(curl -sN --max-time 120 -H 'Content-Type: application/json' --data-binary \
  '{"input":"Why is the sky blue?","temperature":0,"max_output_tokens":6,"stream":true}' "$URL_Q/v1/responses" |
  sed -n 's/^data: //p' | jq -rs 'map(select(.type == "response.reasoning_text.delta") | .delta) | add')
[ "$SR" = "$R6" ] || fail "responses reasoning streamed: '$SR' vs '$R6'"
expect_error "$URL_Q" /v1/responses '{"input":"x","reasoning":{"effort":"high"}}' 400 '.param == "reasoning.effort"'
# /v1/messages: a thinking block (empty signature), whole and streamed as thinking_delta.
post "$URL_Q" /v1/messages '{"messages":[{"role":"user","content":"Why is the sky blue?"}],"temperature":0,"max_tokens":6}'
echo "$BODY" | jq -e --arg r "$R6" '.stop_reason == "max_tokens" and .content == [{"type": "thinking",
  "thinking": $r, "signature": ""}]' >/dev/null || fail "messages thinking: $BODY"
ST=$(curl -sN --max-time 120 -H 'Content-Type: application/json' --data-binary \
  '{"messages":[{"role":"user","content":"Why is the sky blue?"}],"temperature":0,"max_tokens":6,"stream":true}' \
  "$URL_Q/v1/messages" | sed -n 's/^data: //p' |
  jq -rs 'map(select(.type == "content_block_delta" and .delta.type == "thinking_delta") | .delta.thinking) | add')
[ "$ST" = "$R6" ] || fail "messages thinking streamed: '$ST' vs '$R6'"
expect_error "$URL_Q" /v1/chat/completions "{$HI,\"reasoning_format\":\"auto2\"}" 400 '.param == "reasoning_format"'

# Qwen3: enable_thinking false writes an empty thinking into the prompt; reasoning_effort none
# asks for the same.
start_server Q3 --chat-template "$T/Qwen-Qwen3-0.6B.jinja"
post "$URL_Q3" /v1/chat/completions "{$HI,\"max_tokens\":1}"
P=$(echo "$BODY" | jq .usage.prompt_tokens)
post "$URL_Q3" /v1/chat/completions "{$HI,\"max_tokens\":1,\"chat_template_kwargs\":{\"enable_thinking\":false}}"
P_OFF=$(echo "$BODY" | jq .usage.prompt_tokens)
[ "$P_OFF" -gt "$P" ] || fail "enable_thinking false did not reach the template: $P_OFF vs $P"
post "$URL_Q3" /v1/chat/completions "{$HI,\"max_tokens\":1,\"reasoning_effort\":\"none\"}"
[ "$(echo "$BODY" | jq .usage.prompt_tokens)" = "$P_OFF" ] || fail "reasoning_effort none: $BODY"
# Calls from a thinking model are read after its thinking only: with the thinking kept in the
# content (none) a call drafted inside it would be taken, so that is refused.
TOOLS='"tools":[{"type":"function","function":{"name":"now","parameters":{"type":"object"}}}]'
expect_error "$URL_Q" /v1/chat/completions "{$HI,$TOOLS,\"reasoning_format\":\"none\"}" 400 '.param == "reasoning_format"'
# Anthropic's thinking disabled switches it off the same way (the prompt grows by the same
# empty thinking); on a template that thinks and cannot switch it off (DeepSeek-R1's) it is
# refused.
MSG='"messages":[{"role":"user","content":"Why is the sky blue?"}],"temperature":0,"max_tokens":1'
post "$URL_Q3" /v1/messages "{$MSG}"
M_ON=$(echo "$BODY" | jq .usage.input_tokens)
post "$URL_Q3" /v1/messages "{$MSG,\"thinking\":{\"type\":\"disabled\"}}"
[ "$(echo "$BODY" | jq .usage.input_tokens)" -gt "$M_ON" ] || fail "thinking disabled ignored: $BODY"
start_server R1 --chat-template "$T/deepseek-ai-DeepSeek-R1-Distill-Llama-8B.jinja"
post "$URL_R1" /v1/messages "{$MSG,\"thinking\":{\"type\":\"disabled\"}}"
[ "$STATUS" = 400 ] && echo "$BODY" | jq -e '.type == "error" and (.error.message | test("thinking"))' >/dev/null ||
  fail "thinking disabled on DeepSeek-R1: $STATUS $BODY"

# gpt-oss's harmony on the demo with its tokens.
python3 "$HERE/token_model.py" "$DEMO" "$T/openai-gpt-oss-120b.jinja" "$WORK/harmony" \
  '<|return|>' '<|start|>' '<|channel|>' '<|message|>' '<|end|>' '<|call|>' '<|constrain|>'
start_server H -m "$WORK/harmony"
grep -q "tool calls in the harmony syntax" "$WORK/H.log" || fail "harmony not detected"
# A request cannot spell harmony's headers: in a user message they are text (many tokens), not
# the one token each that would forge a turn.
n_prompt() {
  post "$URL_H" /v1/chat/completions "{\"messages\":[{\"role\":\"user\",\"content\":\"$1\"}],\"max_tokens\":1}"
  echo "$BODY" | jq .usage.prompt_tokens
}
for h in '<|start|>' '<|end|>' '<|channel|>' '<|message|>'; do
  [ "$(n_prompt "$h")" -gt "$(( $(n_prompt x) + 2 ))" ] || fail "$h in a user message became a token"
done
# A continued answer would stand where the channel header belongs: refused.
post "$URL_H" /v1/messages '{"messages":[{"role":"user","content":"Hi"},{"role":"assistant","content":"Hello"}],"max_tokens":4}'
[ "$STATUS" = 400 ] || fail "a prefill on harmony: $STATUS $BODY"
HG='"grammar":"root ::= \"<|channel|>analysis<|message|>\" [a-z ]{8,40} \"<|end|><|start|>assistant<|channel|>final<|message|>\" [a-z ]{8,40}","max_tokens":150'
post "$URL_H" /v1/chat/completions "{$HI,$HG}"
echo "$BODY" | jq -e '.choices[0].message | (.reasoning_content | test("^[a-z ]{8,40}$")) and
  (.content | test("^[a-z ]{8,40}$"))' >/dev/null || fail "harmony not split: $BODY"
S=$(stream "$URL_H" "{$HI,$HG,\"stream\":true}")
[ "$(echo "$S" | jq -c '[.reasoning, .content]')" = "$(echo "$BODY" | jq -c '.choices[0].message | [.reasoning_content, .content]')" ] ||
  fail "harmony streamed: $S vs $BODY"
post "$URL_H" /v1/chat/completions "{$HI,$HG,\"reasoning_format\":\"none\"}"
echo "$BODY" | jq -e '.choices[0].message.content | test("^<\\|channel\\|>analysis<\\|message\\|>[a-z ]+<\\|end\\|>[a-z ]+$")' >/dev/null ||
  fail "harmony none: $BODY"
TOOLS='"tools":[{"type":"function","function":{"name":"get_weather","description":"Weather now","parameters":{"type":"object","properties":{"unit":{"enum":["c","f"]}},"required":["unit"],"additionalProperties":false}}}]'
for s in false true; do
  if [ $s = false ]; then
    post "$URL_H" /v1/chat/completions "{$HI,$TOOLS,\"tool_choice\":\"required\",\"max_tokens\":80}"
    CALLS=$(echo "$BODY" | jq -c '[.choices[0].finish_reason, (.choices[0].message.tool_calls[] | .function)]')
  else
    CALLS=$(stream "$URL_H" "{$HI,$TOOLS,\"tool_choice\":\"required\",\"max_tokens\":80,\"stream\":true}" |
      jq -c '["tool_calls", (.calls[] | .function)]')
  fi
  echo "$CALLS" | jq -e '.[0] == "tool_calls" and length == 2 and .[1].name == "get_weather" and
    ((.[1].arguments | fromjson) as $a | $a.unit == "c" or $a.unit == "f")' >/dev/null ||
    fail "harmony call (stream $s): $CALLS $BODY"
done
# A JSON response_format is written in the final channel (the output starts with its header).
post "$URL_H" /v1/chat/completions "{$HI,\"max_tokens\":80,\"logprobs\":true,\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"name\":\"a\",\"schema\":{\"type\":\"object\",\"properties\":{\"ok\":{\"type\":\"boolean\"}},\"required\":[\"ok\"],\"additionalProperties\":false}}}}"
echo "$BODY" | jq -e '.choices[0] | (.message.content | fromjson | .ok | type == "boolean") and
  ([.logprobs.content[].token] | join("") | startswith("<|channel|>"))' >/dev/null ||
  fail "harmony response_format: $BODY"
post "$URL_H" /v1/chat/completions "{$HI,\"max_tokens\":1,\"reasoning_effort\":\"high\"}"
[ "$STATUS" = 200 ] || fail "reasoning_effort high: $BODY"
for e in none minimal; do
  expect_error "$URL_H" /v1/chat/completions "{$HI,\"reasoning_effort\":\"$e\"}" 400 '.param == "reasoning_effort"'
done
# An earlier turn's thinking goes back to the template (as `thinking`; kept before a call).
TURN='{"role":"assistant","content":"","tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"unit\":\"c\"}"}}]'
RESULT='{"role":"tool","tool_call_id":"call_1","content":"18"}'
post "$URL_H" /v1/chat/completions "{\"messages\":[{\"role\":\"user\",\"content\":\"Weather?\"},$TURN},$RESULT],$TOOLS,\"max_tokens\":1}"
P=$(echo "$BODY" | jq .usage.prompt_tokens)
post "$URL_H" /v1/chat/completions "{\"messages\":[{\"role\":\"user\",\"content\":\"Weather?\"},$TURN,\"reasoning_content\":\"I need the weather tool\"},$RESULT],$TOOLS,\"max_tokens\":1}"
[ "$(echo "$BODY" | jq .usage.prompt_tokens)" -gt "$P" ] || fail "the turn's thinking was dropped: $BODY"
echo "reasoning: ok"
