#!/usr/bin/env bash
# The web chat at / (src/server/webui/), in a real browser: webui.mjs drives Debian's chromium
# headless through playwright-core against jitllmd on the bundled demo model. Here, the HTTP side:
# the page loads without the API key (the API does not), with its content types, CSP and ETag.
# Skipped (exit 77) without node, playwright-core (npm ci here) or chromium (scripts/setup-deps
# installs all three). JITLLM_WEBUI_SCREENSHOT=FILE also writes a screenshot (docs/webui.png).
# Usage: webui.sh JITLLMD
source "$(dirname "$0")/lib.bash" "$@"
CHROMIUM=${JITLLM_CHROMIUM:-/usr/bin/chromium}
command -v node >/dev/null || { echo "SKIP: node is not installed"; exit 77; }
# playwright-core 1.65 needs Node 20 (Debian 12's own nodejs is 18).
[ "$(node -p 'process.versions.node.split(".")[0]')" -ge 20 ] ||
  { echo "SKIP: playwright-core needs Node >= 20, this is $(node --version)"; exit 77; }
[ -f "$HERE/node_modules/playwright-core/package.json" ] ||
  { echo "SKIP: run 'npm ci --prefix tests/server_it' (scripts/setup-deps does)"; exit 77; }
[ -x "$CHROMIUM" ] || { echo "SKIP: no chromium at $CHROMIUM (apt-get install chromium; scripts/setup-deps does)"; exit 77; }

KEY=webui-s3cret
start_server W --alias demo --api-key "$KEY" -np 2
U=$URL_W

# The page and its files need no key; their types, security headers and cache validator.
HDRS=$(curl -s -D - -o "$WORK/index.html" --max-time 5 "$U/")
echo "$HDRS" | grep -q '^HTTP/1.1 200' || fail "GET /: $HDRS"
echo "$HDRS" | grep -qi '^Content-Type: text/html; charset=utf-8' || fail "GET / type: $HDRS"
echo "$HDRS" | grep -qi "^Content-Security-Policy: default-src 'none'; script-src 'self';" || fail "GET / CSP: $HDRS"
echo "$HDRS" | grep -qi '^X-Content-Type-Options: nosniff' || fail "GET / nosniff: $HDRS"
grep -q '<script type="module" src="app.js">' "$WORK/index.html" || fail "GET / is not the page"
cmp -s "$WORK/index.html" "$HERE/../../src/server/webui/index.html" || fail "GET / differs from src/server/webui/index.html"
ETAG=$(echo "$HDRS" | tr -d '\r' | awk -F': ' 'tolower($1) == "etag" { print $2 }')
[[ "$ETAG" =~ ^\"[0-9a-f]{16}\"$ ]] || fail "ETag '$ETAG'"
[ "$(curl -s -o /dev/null -w '%{http_code}' -H "If-None-Match: $ETAG" --max-time 5 "$U/")" = 304 ] ||
  fail "If-None-Match with the ETag is not a 304"
[ "$(curl -s -o /dev/null -w '%{http_code}' -H 'If-None-Match: "0000000000000000"' --max-time 5 "$U/index.html")" = 200 ] ||
  fail "a stale ETag is not a 200"
for f in app.js:text/javascript style.css:text/css render.js:text/javascript favicon.svg:image/svg+xml; do
  T=$(curl -s -o /dev/null -w '%{http_code} %{content_type}' --max-time 5 "$U/${f%%:*}")
  [[ "$T" == "200 ${f#*:}"* ]] || fail "GET /${f%%:*}: $T"
done
# Only the page is open: the API, other paths and other methods on / still want the key.
for req in "GET /v1/models" "GET /nothing.js" "POST /" "GET /props"; do
  [ "$(curl -s -o /dev/null -w '%{http_code}' -X "${req% *}" --max-time 5 "$U${req#* }")" = 401 ] ||
    fail "$req without the key is not a 401"
done

timeout 90 node "$HERE/webui.mjs" "$U" "$KEY" "$CHROMIUM" "${JITLLM_WEBUI_SCREENSHOT:-}" || fail "browser checks"
# The page's requests have their own label in /metrics (not "other", the unknown paths').
[ "$(metric "$U" 'requests_total{endpoint="webui"}')" -ge 8 ] ||
  fail "requests_total{endpoint=\"webui\"}: $(curl -s "$U/metrics" | grep requests_total)"
