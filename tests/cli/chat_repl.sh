#!/usr/bin/env bash
# `jitllm run --chat` on the bundled demo model, fed from a pipe and from a terminal (python's
# pty): the commands (/help, /save, /load, /clear, /bye, unknown ones not sent to the model), old
# turns dropped when the context fills (the chat goes on), a message too long for the context not
# sent, --chat-template by built-in name (the prompt is that template's), line editing and the
# history on a terminal.
set -euo pipefail
JITLLM="$1"
DEMO="$(cd "$(dirname "$0")/../../models/demo" && pwd)"
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
export XDG_CACHE_HOME="$TMP/cache" XDG_STATE_HOME="$TMP/state"
chat() { timeout 120 "$JITLLM" run --chat -m "$DEMO" --temp 0 -t 2 "$@"; }

# 1. Commands, turns dropped as the 96-token context fills, save and load. Greedy answers on the
# demo model run past 24 tokens, so each is cut at -n 24 and the speed line counts 24 per
# answer: four answers, none for the commands or after /bye.
printf '%s\n' /help "Hello there, how are you?" "Tell me about the python list type." \
  "/save $TMP/conv.json" "And dictionaries, and sets?" /nope "/load $TMP/conv.json" \
  "/load $TMP/missing.json" "What about tuples?" "/save $TMP/after-load.json" /bye \
  "/save $TMP/after-bye.json" |
  chat -c 96 -n 24 > "$TMP/1.out" 2> "$TMP/1.err" || fail "chat exited $?: $(cat "$TMP/1.err")"
grep -q "/save FILE" "$TMP/1.err" || fail "/help: $(cat "$TMP/1.err")"
grep -q "\[4 messages saved to $TMP/conv.json\]" "$TMP/1.err" || fail "/save: $(cat "$TMP/1.err")"
grep -q "dropped the oldest 2 messages" "$TMP/1.err" || fail "no turn dropped: $(cat "$TMP/1.err")"
grep -q "\[unknown command /nope" "$TMP/1.err" || fail "unknown command: $(cat "$TMP/1.err")"
grep -q "\[4 messages loaded from" "$TMP/1.err" || fail "/load: $(cat "$TMP/1.err")"
grep -q "missing.json: cannot read" "$TMP/1.err" || fail "/load of a missing file"
grep -q "generation: 96 tokens" "$TMP/1.err" || fail "not four answers of 24 tokens: $(cat "$TMP/1.err")"
[ ! -e "$TMP/after-bye.json" ] || fail "a line after /bye was read"
python3 - "$TMP/conv.json" "$TMP/after-load.json" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
assert [x["role"] for x in m] == ["user", "assistant", "user", "assistant"], m
assert m[0]["content"] == "Hello there, how are you?" and m[1]["content"], m
# After /load the conversation is the loaded one (its oldest turn dropped again to fit 96
# tokens) and the next turn continues it.
after = json.load(open(sys.argv[2]))
assert len(after) >= 4 and after[:-2] == m[len(m) - len(after) + 2:], after
assert [x["role"] for x in after[-2:]] == ["user", "assistant"] and after[-2]["content"] == "What about tuples?", after
PY

# 1b. A conversation the model's template refuses is not loaded (a template that wants roles to
# alternate, and a saved conversation ending on a user turn); the chat goes on as it was.
cat > "$TMP/alt.jinja" <<'JINJA'
{% for m in messages %}{% if (m['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ raise_exception('roles must alternate') }}{% endif %}{{ '<|' + m['role'] + '|>\n' + m['content'] + '<|end|>\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|assistant|>\n' }}{% endif %}
JINJA
echo '[{"role": "user", "content": "a"}]' > "$TMP/user-last.json"
printf '%s\n' "first" "/load $TMP/user-last.json" "second" "/save $TMP/alt.json" |
  chat -c 256 -n 4 --chat-template "$TMP/alt.jinja" > /dev/null 2> "$TMP/1b.err" ||
  fail "chat died on a refused /load: $(cat "$TMP/1b.err")"
grep -q "the chat template refuses this conversation (.*roles must alternate.*); nothing loaded" "$TMP/1b.err" ||
  fail "refused /load: $(cat "$TMP/1b.err")"
python3 -c 'import json,sys; m=json.load(open(sys.argv[1])); assert [x["content"] for x in m if x["role"]=="user"] == ["first", "second"], m' \
  "$TMP/alt.json" || fail "conversation after a refused /load"
# A device or a huge file is not read.
printf '%s\n' "/load /dev/zero" | chat -n 1 > /dev/null 2> "$TMP/1c.err" || fail "/load /dev/zero"
grep -q "/dev/zero: cannot read (not a file)" "$TMP/1c.err" || fail "/dev/zero: $(cat "$TMP/1c.err")"

# 2. A message longer than the context is not sent; the chat goes on and answers the next one.
long=$(printf 'word %.0s' $(seq 200))
printf '%s\n' "$long" "Hi" | chat -c 64 -n 4 > "$TMP/2.out" 2> "$TMP/2.err" || fail "chat died on a long message"
grep -q "the context holds 64 (-c): not sent" "$TMP/2.err" || fail "long message: $(cat "$TMP/2.err")"
grep -q "generation: 4 tokens" "$TMP/2.err" || fail "no answer after the long message: $(cat "$TMP/2.err")"

# 3. --chat-template chatml: the prompt is ChatML's (its token count, from `jitllm tokenize`).
printf '%s\n' "$long" | chat -c 64 -n 4 --chat-template chatml 2> "$TMP/3.err" > /dev/null
printf '<|im_start|>user\n%s<|im_end|>\n<|im_start|>assistant\n' "$long" > "$TMP/chatml.txt"
want=$("$JITLLM" tokenize -m "$DEMO" --parse-special -f "$TMP/chatml.txt" | wc -w)
grep -q "makes a prompt of $want tokens" "$TMP/3.err" || fail "chatml prompt is not $want tokens: $(cat "$TMP/3.err")"
if "$JITLLM" run --chat -m "$DEMO" --chat-template nosuch < /dev/null 2> "$TMP/4.err"; then
  fail "an unknown template name was accepted"
fi
grep -q "not a built-in template (chatml, qwen, llama3, gemma, mistral, phi3)" "$TMP/4.err" ||
  fail "template message: $(cat "$TMP/4.err")"

# 4. On a terminal: editing (arrow keys), the history (Up recalls the last line), kept in a file.
python3 - "$JITLLM" "$DEMO" "$TMP/state/jitllm/chat_history" <<'PY'
import os, pty, select, signal, sys, termios, time
jitllm, demo, history = sys.argv[1:]
signal.alarm(120)  # a REPL that never exits fails the test instead of hanging it
pid, fd = pty.fork()
if pid == 0:
    os.execv(jitllm, [jitllm, "run", "--chat", "-m", demo, "-c", "256", "-n", "4", "--temp", "0", "-t", "2"])
out = b""
def pump(until, seconds=60):
    global out
    end = time.time() + seconds
    while until not in out and time.time() < end:
        if select.select([fd], [], [], 0.1)[0]:
            try:
                out += os.read(fd, 4096)
            except OSError:
                return
def send(keys, until):
    global out
    # Keys typed before libedit has put the terminal in raw mode may be flushed by it: wait for
    # the mode (the master reads the pty's settings) and a little longer.
    while termios.tcgetattr(fd)[3] & termios.ICANON:
        time.sleep(0.02)
    time.sleep(0.1)
    out = b""
    os.write(fd, keys)
    pump(until)
    return out
pump(b"commands")
pump(b"> ")
# Two Left arrows, then insert: "hello wrold"; the answer ends with the next prompt.
first = send(b"hello wrld\x1b[D\x1b[Do\r", b"\n> ")
again = send(b"\x1b[A\r", b"\n> ")  # Up, Enter: the same line again
send(b"\x04", b"generation:")  # Ctrl-D
os.waitpid(pid, 0)
assert b"hello wrold" in again, again
lines = [l for l in open(history).read().splitlines() if not l.startswith("_HiStOrY")]
assert lines == ["hello\\040wrold", "hello\\040wrold"], lines
PY
echo "chat_repl: ok"
