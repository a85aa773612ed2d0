"""The demo model's chat format: special tokens, the Jinja chat template, and a Python renderer.

Owns: the one definition of how a dialog is laid out, shared by data preparation (which writes
dialogs into the corpus) and the training script (which puts the template into
tokenizer_config.json and checks that transformers renders dialogs byte-identically).
"""

BOS = "<|endoftext|>"  # begins every document (and every chat); id 0
END = "<|end|>"        # ends every chat turn; the chat EOS
SPECIAL_TOKENS = [BOS, "<|system|>", "<|user|>", "<|assistant|>", END]
ROLES = ("system", "user", "assistant")

# Layout: <|endoftext|><|role|>\n{content}<|end|>\n ... then "<|assistant|>\n" to prompt.
CHAT_TEMPLATE = (
    "{{ bos_token }}"
    "{% for message in messages %}"
    "{% if message['role'] not in ['system', 'user', 'assistant'] %}"
    "{{ raise_exception('role must be system, user or assistant') }}"
    "{% endif %}"
    "{{ '<|' + message['role'] + '|>\\n' + message['content'] | trim + '<|end|>\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|assistant|>\\n' }}{% endif %}"
)


def render(messages, add_generation_prompt=False, bos=True):
    """Python twin of CHAT_TEMPLATE (what the corpus contains; checked against transformers)."""
    out = [BOS] if bos else []
    for m in messages:
        if m["role"] not in ROLES:
            raise ValueError(f"chat role must be one of {ROLES}, got {m['role']!r}")
        out.append(f"<|{m['role']}|>\n{m['content'].strip()}{END}\n")
    if add_generation_prompt:
        out.append("<|assistant|>\n")
    return "".join(out)
