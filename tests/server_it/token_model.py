#!/usr/bin/env python3
"""Writes a copy of the bundled demo model (an HF folder) whose vocabulary holds another model
family's control tokens, with that family's chat template: the demo's special tokens 1-4
(<|system|>, <|user|>, <|assistant|>, <|end|>) and then its last merges give their ids to the
texts given, in order (control tokens; a text written +TEXT is a user-defined token, which the
decoder writes as text, as <think> is in DeepSeek's vocabulary), the first of which is the EOS. The weights are the
demo's: what it writes is not that family's format by itself, but grammars make it, which is
what the server tests need (reasoning.sh, tool_calls.sh). Python's standard library only.

  token_model.py DEMO_FOLDER TEMPLATE DST EOS_TEXT [TEXT...]

gpt-oss: <|return|> <|start|> <|channel|> <|message|> <|end|> <|call|> <|constrain|>"""
import json
import shutil
import sys
from pathlib import Path

src, template, dst = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])
texts = [t.removeprefix("+") for t in sys.argv[4:]]
special = [not t.startswith("+") for t in sys.argv[4:]]
shutil.copytree(src, dst)
for f in dst.iterdir():
    f.chmod(0o644)

tok = json.loads((dst / "tokenizer.json").read_text())
vocab, merges = tok["model"]["vocab"], tok["model"]["merges"]
n = len(vocab)
n_taken = max(0, len(texts) - 4)
ids = [1, 2, 3, 4][: len(texts)] + list(range(n - n_taken, n))
by_id = {i: t for t, i in vocab.items()}
# The merges that made the tokens taken go with them (they are the last merges).
gone = {by_id[i] for i in ids[4:]}
tok["model"]["merges"] = [m for m in merges if "".join(m if isinstance(m, list) else m.split(" ")) not in gone]
assert len(tok["model"]["merges"]) == len(merges) - n_taken
added = {a["id"]: a for a in tok["added_tokens"]}
for i, text, is_special in zip(ids, texts, special):
    del vocab[by_id[i]]
    vocab[text] = i
    added[i] = {"id": i, "content": text, "single_word": False, "lstrip": False, "rstrip": False,
                "normalized": False, "special": is_special}
tok["added_tokens"] = [added[i] for i in sorted(added)]
(dst / "tokenizer.json").write_text(json.dumps(tok, ensure_ascii=False))

eos = ids[0]
cfg = json.loads((dst / "tokenizer_config.json").read_text())
cfg["eos_token"] = texts[0]
cfg["chat_template"] = template.read_text()
(dst / "tokenizer_config.json").write_text(json.dumps(cfg, ensure_ascii=False))
model = json.loads((dst / "config.json").read_text())
model["eos_token_id"] = eos
(dst / "config.json").write_text(json.dumps(model))
gen = json.loads((dst / "generation_config.json").read_text())
gen["eos_token_id"] = eos
(dst / "generation_config.json").write_text(json.dumps(gen))
