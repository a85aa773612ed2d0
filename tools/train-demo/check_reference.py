#!/usr/bin/python3
"""Independent check of models/demo: a float64 numpy forward pass over the F16 safetensors.

Owns: verifying, without torch or transformers, that reference.json / reference_logits.f32 follow
from the committed weights and config (Llama: RMSNorm, HF rotate-half RoPE, causal GQA attention,
SwiGLU, tied lm_head). Prints the max logit difference at each prompt's last position and whether
numpy's greedy ids equal transformers'. Needs python3-numpy. Usage:
    tools/train-demo/check_reference.py [models/demo] [--greedy N]
"""
import argparse
import json
import os
import struct
import sys

import numpy as np


def load_safetensors(path):
    data = open(path, "rb").read()
    if len(data) < 8:
        sys.exit(f"{path}: too short for a safetensors header")
    n = struct.unpack_from("<Q", data, 0)[0]
    if 8 + n > len(data):
        sys.exit(f"{path}: header length {n} runs past the end of the file")
    header = json.loads(data[8:8 + n])
    header.pop("__metadata__", None)
    out = {}
    for name, t in header.items():
        if t["dtype"] != "F16":
            sys.exit(f"{path}: tensor {name} is {t['dtype']}, expected F16")
        a, b = t["data_offsets"]
        out[name] = np.frombuffer(data, dtype="<f2", count=(b - a) // 2, offset=8 + n + a) \
            .reshape(t["shape"]).astype(np.float64)
    return out


class Llama:
    def __init__(self, folder):
        c = json.load(open(os.path.join(folder, "config.json")))
        self.c = c
        self.w = load_safetensors(os.path.join(folder, "model.safetensors"))
        self.hd = c.get("head_dim") or c["hidden_size"] // c["num_attention_heads"]
        theta = (c.get("rope_parameters") or {}).get("rope_theta", c.get("rope_theta", 10000.0))
        self.inv_freq = 1.0 / theta ** (np.arange(0, self.hd, 2, dtype=np.float64) / self.hd)
        self.lm_head = self.w.get("lm_head.weight", self.w["model.embed_tokens.weight"])

    def norm(self, x, w):
        return x / np.sqrt((x * x).mean(-1, keepdims=True) + self.c["rms_norm_eps"]) * w

    def rope(self, x):  # x [n_tok, n_head, hd]; HF layout: rotate the two halves
        pos = np.arange(x.shape[0], dtype=np.float64)[:, None] * self.inv_freq[None, :]
        cos, sin = np.cos(pos)[:, None, :], np.sin(pos)[:, None, :]
        h = self.hd // 2
        x1, x2 = x[..., :h], x[..., h:]
        return np.concatenate([x1 * cos - x2 * sin, x2 * cos + x1 * sin], axis=-1)

    def logits(self, ids):
        c, w = self.c, self.w
        nh, nkv, hd = c["num_attention_heads"], c["num_key_value_heads"], self.hd
        x = w["model.embed_tokens.weight"][ids]  # [n_tok, n_embd]
        n = len(ids)
        mask = np.triu(np.full((n, n), -np.inf), 1)
        for i in range(c["num_hidden_layers"]):
            p = f"model.layers.{i}."
            h = self.norm(x, w[p + "input_layernorm.weight"])
            q = self.rope((h @ w[p + "self_attn.q_proj.weight"].T).reshape(n, nh, hd))
            k = self.rope((h @ w[p + "self_attn.k_proj.weight"].T).reshape(n, nkv, hd))
            v = (h @ w[p + "self_attn.v_proj.weight"].T).reshape(n, nkv, hd)
            rep = nh // nkv  # query head j uses KV head j // rep
            k, v = np.repeat(k, rep, axis=1), np.repeat(v, rep, axis=1)
            s = np.einsum("qhd,khd->hqk", q, k) / np.sqrt(hd) + mask
            s = np.exp(s - s.max(-1, keepdims=True))
            s /= s.sum(-1, keepdims=True)
            a = np.einsum("hqk,khd->qhd", s, v).reshape(n, nh * hd)
            x = x + a @ w[p + "self_attn.o_proj.weight"].T
            h = self.norm(x, w[p + "post_attention_layernorm.weight"])
            g = h @ w[p + "mlp.gate_proj.weight"].T
            u = h @ w[p + "mlp.up_proj.weight"].T
            x = x + (g / (1 + np.exp(-g)) * u) @ w[p + "mlp.down_proj.weight"].T
        return self.norm(x, w["model.norm.weight"]) @ self.lm_head.T  # [n_tok, vocab]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("folder", nargs="?", default=os.path.join(os.path.dirname(__file__), "../../models/demo"))
    ap.add_argument("--greedy", type=int, default=8, help="greedy steps to compare per prompt")
    args = ap.parse_args()
    ref = json.load(open(os.path.join(args.folder, "reference.json")))
    V = ref["vocab_size"]
    rows = np.fromfile(os.path.join(args.folder, ref["logits_file"]["name"]), dtype="<f4").reshape(-1, V)
    m = Llama(args.folder)
    worst = 0.0
    for p in ref["prompts"]:
        ids = list(p["prompt_ids"])
        got = m.logits(ids)[-1]
        diff = float(np.abs(got - rows[p["logits_row"]]).max())
        worst = max(worst, diff)
        gen = []
        for step in range(args.greedy):
            nxt = int(np.argmax(got if step == 0 else m.logits(ids)[-1]))
            gen.append(nxt)
            ids.append(nxt)
        same = gen == p["greedy_ids"][:args.greedy]
        print(f"{p['name']:10s} last-position max|diff| {diff:.2e}  greedy {args.greedy}/{args.greedy} "
              f"{'equal' if same else 'DIFFERENT: ' + str(gen)}")
        if not same:
            sys.exit(1)
    print(f"worst max|diff| {worst:.2e}")
    if worst > 1e-3:
        sys.exit("logits differ by more than 1e-3")


if __name__ == "__main__":
    main()
