"""Reference outputs of demo-model computed by transformers from the saved F16 folder.

Owns: reference.json + reference_logits.f32 in the model folder: for fixed prompts (plain text and
chat-formatted), the prompt ids, 32 greedy ids and text, the top-1/top-2 margin at every greedy
step, the top-5 of the last prompt position, and that position's full logits. Computed on the CPU
in float32 from the F16 weights (upcast at load), full recompute per step (no KV cache), so the
numbers depend only on the saved files. Also: tokenizer test cases and a few sampled texts.
"""
import argparse
import json
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import chat_format  # noqa: E402

TEXT_PROMPTS = [
    ("python", "The Python interpreter"),
    ("postgres", "PostgreSQL is a"),
    ("debian", "To install a package on Debian,"),
    ("austen", "Elizabeth looked at her sister and"),
]
CHAT_PROMPTS = [
    ("chat_word", [{"role": "user", "content": "What does the word \"library\" mean?"}]),
    ("chat_git", [{"role": "system", "content": "You are a concise assistant. Answer in plain English."},
                  {"role": "user", "content": "What does git commit do?"}]),
]
TOKENIZER_CASES = [
    "", " ", "Hello world", "Hello, world!", " leading space", "trailing space ", "two  spaces\tand tab",
    "line one\nline two\n\n", "It's we're they'll I'd you've", "numbers 12345 3.14159 1,000,000",
    "def f(x):\n    return x ** 2  # square", "SELECT * FROM weather WHERE city = 'Hayward';",
    "naïve café résumé", "Ünïcödé → 日本語 😀", "apt-get install --no-install-recommends python3",
    "<|user|>\nHi<|end|>\n<|assistant|>\n", "text<|end|>more", "<|endoftext|>", "  \n  \n",
    "It is a truth universally acknowledged, that a single man in possession of a good fortune",
]


@torch.no_grad()
def greedy(model, ids, n):
    ids = list(ids)
    out, margins, first_logits = [], [], None
    for step in range(n):
        logits = model(input_ids=torch.tensor([ids])).logits[0, -1].float()
        if step == 0:
            first_logits = logits.clone()
        top2 = torch.topk(logits, 2)
        margins.append(round(float(top2.values[0] - top2.values[1]), 5))
        nxt = int(top2.indices[0])
        out.append(nxt)
        ids.append(nxt)
    return out, margins, first_logits


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--n", type=int, default=32)
    args = ap.parse_args()
    from transformers import AutoModelForCausalLM, AutoTokenizer
    import transformers
    torch.set_num_threads(min(8, os.cpu_count() or 1))
    tok = AutoTokenizer.from_pretrained(args.model)
    model = AutoModelForCausalLM.from_pretrained(args.model, dtype=torch.float32).eval()
    assert next(model.parameters()).dtype == torch.float32

    # the template in tokenizer_config.json must render exactly what the corpus contains
    for _, msgs in CHAT_PROMPTS:
        got = tok.apply_chat_template(msgs, add_generation_prompt=True, tokenize=False)
        want = chat_format.render(msgs, add_generation_prompt=True)
        if got != want:
            sys.exit(f"chat template mismatch:\n{got!r}\n{want!r}")

    prompts = [(name, "text", text, None) for name, text in TEXT_PROMPTS]
    prompts += [(name, "chat", chat_format.render(m, add_generation_prompt=True), m) for name, m in CHAT_PROMPTS]
    rows, entries = [], []
    for name, kind, text, msgs in prompts:
        if kind == "text":
            ids = tok(text, add_special_tokens=True)["input_ids"]
        else:
            ids = tok(text, add_special_tokens=False)["input_ids"]  # template already holds the BOS
        gen, margins, last = greedy(model, ids, args.n)
        top5 = torch.topk(last, 5)
        e = {"name": name, "kind": kind, "prompt": text, "prompt_ids": ids,
             "greedy_ids": gen, "greedy_text": tok.decode(gen, skip_special_tokens=False),
             "margins": margins, "min_margin": min(margins),
             "last_top5": [[int(i), round(float(v), 5)] for v, i in zip(top5.values, top5.indices)],
             "logits_row": len(rows)}
        if msgs:
            e["messages"] = msgs
        entries.append(e)
        rows.append(last.numpy().astype("<f4"))
        print(f"{name}: {text!r} -> {e['greedy_text']!r} (min margin {e['min_margin']})", flush=True)
    np.stack(rows).tofile(os.path.join(args.model, "reference_logits.f32"))

    cases = [{"text": s, "ids": tok(s, add_special_tokens=True)["input_ids"]} for s in TOKENIZER_CASES]
    for c in cases:
        back = tok.decode(c["ids"], skip_special_tokens=False)
        assert back == chat_format.BOS + c["text"], (c, back)

    torch.manual_seed(7)
    samples = []
    for name, kind, text, msgs in prompts:
        ids = tok(text, add_special_tokens=(kind == "text"), return_tensors="pt")["input_ids"]
        g = model.generate(ids, max_new_tokens=96, do_sample=True, temperature=0.7, top_k=40, top_p=0.9,
                           pad_token_id=tok.pad_token_id)
        samples.append({"name": name, "text": tok.decode(g[0, ids.shape[1]:], skip_special_tokens=False)})

    ref = {
        "model": "demo-model",
        "computed_with": {"transformers": transformers.__version__, "torch": torch.__version__,
                          "device": "cpu", "dtype": "float32 (F16 safetensors upcast at load)",
                          "method": "greedy argmax, full recompute of the sequence at every step, no KV cache"},
        "bos_id": tok.convert_tokens_to_ids(chat_format.BOS),
        "eos_ids": [tok.convert_tokens_to_ids(chat_format.END), tok.convert_tokens_to_ids(chat_format.BOS)],
        "vocab_size": model.config.vocab_size,
        "logits_file": {"name": "reference_logits.f32", "dtype": "float32 little-endian",
                        "shape": [len(rows), model.config.vocab_size],
                        "what": "logits at the last prompt position of each prompt, row = logits_row"},
        "prompts": entries,
        "tokenizer_cases": cases,
        "samples_note": "sampled (temperature 0.7, top-k 40, top-p 0.9, torch seed 7): illustration only",
        "samples": samples,
    }
    json.dump(ref, open(os.path.join(args.model, "reference.json"), "w"), indent=1, ensure_ascii=False)
    print("reference.json written", flush=True)


if __name__ == "__main__":
    main()
