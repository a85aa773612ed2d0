#!/usr/bin/env python3
"""Writes a copy of the bundled demo model (an HF folder) that speaks gpt-oss's harmony format as
far as its tokens go: its special tokens <|system|>, <|user|>, <|assistant|> become <|start|>,
<|channel|>, <|message|>, its three last merges give their ids to <|constrain|>, <|return|> and
<|call|> (control tokens), <|return|> is the EOS and the chat template is gpt-oss's. The weights
are the demo's: what it writes is not harmony by itself, but grammars and logit biases can make
it, which is what the server tests need (harmony.sh). Python's standard library only.

  harmony_model.py DEMO_FOLDER GPT_OSS_TEMPLATE DST"""
import json
import shutil
import sys
from pathlib import Path

src, template, dst = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])
shutil.copytree(src, dst)
for f in dst.iterdir():
    f.chmod(0o644)

tok = json.loads((dst / "tokenizer.json").read_text())
vocab, merges = tok["model"]["vocab"], tok["model"]["merges"]
renamed = {1: "<|start|>", 2: "<|channel|>", 3: "<|message|>"}
n = len(vocab)
taken = {n - 3: "<|constrain|>", n - 2: "<|return|>", n - 1: "<|call|>"}
by_id = {i: t for t, i in vocab.items()}
# The merges that made the three last tokens go with them (they are the last three merges).
gone = {by_id[i] for i in taken}
tok["model"]["merges"] = [m for m in merges if "".join(m if isinstance(m, list) else m.split(" ")) not in gone]
assert len(tok["model"]["merges"]) == len(merges) - 3
for i, text in {**renamed, **taken}.items():
    del vocab[by_id[i]]
    vocab[text] = i
added = {a["id"]: a for a in tok["added_tokens"]}
for i, text in {**renamed, **taken}.items():
    added[i] = {"id": i, "content": text, "single_word": False, "lstrip": False, "rstrip": False,
                "normalized": False, "special": True}
tok["added_tokens"] = [added[i] for i in sorted(added)]
(dst / "tokenizer.json").write_text(json.dumps(tok, ensure_ascii=False))

cfg = json.loads((dst / "tokenizer_config.json").read_text())
cfg["eos_token"] = "<|return|>"
cfg["chat_template"] = template.read_text()
cfg.pop("added_tokens_decoder", None)
(dst / "tokenizer_config.json").write_text(json.dumps(cfg, ensure_ascii=False))
model = json.loads((dst / "config.json").read_text())
model["eos_token_id"] = n - 2
(dst / "config.json").write_text(json.dumps(model))
gen = json.loads((dst / "generation_config.json").read_text())
gen["eos_token_id"] = [n - 2, n - 1]
(dst / "generation_config.json").write_text(json.dumps(gen))
