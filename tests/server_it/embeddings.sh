#!/usr/bin/env bash
# Embeddings and reranking end to end on the tiny BERT fixtures (tests/model/data/bert-tiny,
# bert-rerank-tiny): /v1/embeddings through the official OpenAI Node SDK (embeddings.mjs) equal
# to `jitllm embed`; /v1/rerank (and its aliases) with curl: scores equal to `jitllm embed
# --rerank`, sorted, top_n, return_documents; the refusals (generation on an encoder, rank
# pooling on /v1/embeddings, bad fields). Usage: embeddings.sh JITLLMD JITLLM
source "$(dirname "$0")/lib.bash" "$@"
export XDG_CACHE_HOME=$WORK/cache  # the fixture folders are converted into it once
[ -n "$JITLLM" ] || fail "usage: embeddings.sh JITLLMD JITLLM"
DATA="${JITLLM_SOURCE_DIR:-$HERE/../..}/tests/model/data"
start_server E --model "$DATA/bert-tiny" --alias bert
start_server R --model "$DATA/bert-rerank-tiny" --alias rerank
grep -q "an encoder (cls pooling): /v1/embeddings" "$WORK/E.log" || fail "encoder not logged: $(cat "$WORK/E.log")"

T0='The cat sat on the mat.'
T1='A fast engine makes tokens from the prompt.'
"$JITLLM" embed -m "$DATA/bert-tiny" -p "$T0" -p "$T1" --json >"$WORK/expected.json" || fail "jitllm embed"
IDS=$("$JITLLM" tokenize -m "$DATA/bert-tiny" -p "$T0" | tr " " ",")
jq ". + {ids0: [$IDS]}" "$WORK/expected.json" >"$WORK/expected_ids.json"

if command -v node >/dev/null && [ -f "$HERE/node_modules/openai/package.json" ]; then
  timeout 120 node "$HERE/embeddings.mjs" "$URL_E" "$WORK/expected_ids.json" || fail "openai SDK embeddings"
else
  echo "note: node or the OpenAI SDK is missing; the SDK part is skipped (scripts/setup-deps installs them)"
fi

# curl: the same vector, usage, base64 form decodes to the floats.
post "$URL_E" /v1/embeddings "{\"input\":\"$T0\",\"encoding_format\":\"float\"}"
[ "$STATUS" = 200 ] || fail "embeddings: $STATUS $BODY"
echo "$BODY" | jq -e --slurpfile e "$WORK/expected.json" \
  '.model == "bert" and .object == "list" and (.data[0].embedding | length) == 96 and
   ([.data[0].embedding, $e[0].data[0].embedding] | transpose | map(.[0] - .[1] | fabs) | max) < 1e-5' >/dev/null ||
  fail "embedding differs from jitllm embed: $BODY"

# Generation on an encoder, rank on the embedder, bad fields: 400s naming what is wrong.
expect_error "$URL_E" /v1/chat/completions '{"messages":[{"role":"user","content":"hi"}]}' 400 '.message | test("encoder")'
expect_error "$URL_E" /v1/completions '{"prompt":"hi"}' 400 '.message | test("encoder")'
expect_error "$URL_E" /v1/rerank '{"query":"q","documents":["d"]}' 400 '.message | test("classification head")'
expect_error "$URL_R" /v1/embeddings '{"input":"x"}' 400 '.message | test("reranker")'
expect_error "$URL_E" /v1/embeddings '{"input":"x","pooling":"max"}' 400 '.param == "pooling"'
expect_error "$URL_E" /v1/embeddings '{"input":"x","user":"u1"}' 400 '.param == "user"'
expect_error "$URL_E" /v1/embeddings '{"input":[[1,2,99999]]}' 400 '.param == "input"'
expect_error "$URL_E" /v1/embeddings '{"input":[]}' 400 '.param == "input"'
expect_error "$URL_E" /v1/embeddings '{"input":"x","encoding_format":"int8"}' 400 '.param == "encoding_format"'
LONG=$(printf 'cat %.0s' $(seq 1 200))
expect_error "$URL_E" /v1/embeddings "{\"input\":\"$LONG\"}" 400 '.message | test("context")'

# Rerank: scores equal to jitllm embed --rerank, best first, top_n, documents returned.
Q='what sat on the mat'
D0='Money and water in the river bank.'
D1='The cat sat on the mat.'
D2='A fast engine makes tokens on the card.'
"$JITLLM" embed -m "$DATA/bert-rerank-tiny" --rerank "$Q" -p "$D0" -p "$D1" -p "$D2" --json >"$WORK/scores.json" ||
  fail "jitllm embed --rerank"
for path in /v1/rerank /rerank /v1/reranking; do
  post "$URL_R" "$path" "{\"query\":\"$Q\",\"documents\":[\"$D0\",\"$D1\",\"$D2\"],\"top_n\":2,\"return_documents\":true}"
  [ "$STATUS" = 200 ] || fail "$path: $STATUS $BODY"
  echo "$BODY" | jq -e --slurpfile s "$WORK/scores.json" '
    ($s[0].results | sort_by(-.relevance_score)) as $want |
    (.results | length) == 2 and .model == "rerank" and .usage.prompt_tokens > 0 and
    ([.results[].index] == [$want[0].index, $want[1].index]) and
    (.results[0].relevance_score - $want[0].relevance_score | fabs) < 1e-5 and
    (.results[0].relevance_score >= .results[1].relevance_score) and
    (.results[0].document.text | type == "string")' >/dev/null || fail "$path: $BODY vs $(cat "$WORK/scores.json")"
done
expect_error "$URL_R" /v1/rerank '{"query":"q","documents":[]}' 400 '.param == "documents"'
expect_error "$URL_R" /v1/rerank '{"query":"q","documents":["d"],"top_n":0}' 400 '.param == "top_n"'
expect_error "$URL_R" /v1/rerank '{"documents":["d"]}' 400 '.param == "query"'
echo "embeddings: ok"
