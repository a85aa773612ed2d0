"""Trains demo-model on the GPU machine: byte-level BPE tokenizer + a small Llama, saved as an HF folder.

Owns: the whole device-side pipeline: tokenizer training (HF `tokenizers`), tokenization and the
train/validation split, the model definition (transformers LlamaForCausalLM), the time-budgeted
training loop (bf16 autocast, AdamW, warm-up + cosine, best-validation checkpoint), and saving
the F16 folder. Reference outputs are computed afterwards by reference.py from the saved files.
Run through tools/train-demo/run_device.sh (see MODEL_CARD.md for the exact command).
"""
import argparse
import json
import math
import os
import random
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import chat_format  # noqa: E402


def log(*a):
    print(f"[{time.strftime('%H:%M:%S')}]", *a, flush=True)


def split_special(text):
    """Yields the pieces of text between special-token strings (BPE merges never span them)."""
    pieces = [text]
    for s in chat_format.SPECIAL_TOKENS:
        pieces = [q for p in pieces for q in p.split(s)]
    return (p for p in pieces if p)


def train_tokenizer(docs, vocab_size):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=2, show_progress=False,
                                  special_tokens=chat_format.SPECIAL_TOKENS,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator((p for d in docs for p in split_special(d)), trainer=trainer, length=len(docs))
    return tok


def finish_tokenizer(tok):
    """BOS (<|endoftext|>) prepended on encode; the same object is saved as tokenizer.json."""
    from tokenizers import processors
    bos = chat_format.BOS
    bos_id = tok.token_to_id(bos)
    tok.post_processor = processors.TemplateProcessing(single=f"{bos} $A", pair=f"{bos} $A {bos} $B",
                                                       special_tokens=[(bos, bos_id)])
    return tok


def save_tokenizer(tok, out):
    from transformers import PreTrainedTokenizerFast
    hf = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token=chat_format.BOS, eos_token=chat_format.END,
                                 pad_token=chat_format.BOS, model_max_length=512)
    hf.chat_template = chat_format.CHAT_TEMPLATE
    hf.save_pretrained(out)
    # keep the template inside tokenizer_config.json (where the engine reads it), one copy only
    cfg_path = os.path.join(out, "tokenizer_config.json")
    cfg = json.load(open(cfg_path))
    cfg["chat_template"] = chat_format.CHAT_TEMPLATE
    cfg["add_bos_token"] = True
    json.dump(cfg, open(cfg_path, "w"), indent=2, ensure_ascii=False)
    for extra in ("chat_template.jinja", "special_tokens_map.json"):
        if os.path.exists(os.path.join(out, extra)):
            os.remove(os.path.join(out, extra))


def build_model(args, vocab_size, bos_id, eos_id):
    from transformers import LlamaConfig, LlamaForCausalLM
    cfg = LlamaConfig(vocab_size=vocab_size, hidden_size=args.hidden, intermediate_size=args.ffn,
                      num_hidden_layers=args.layers, num_attention_heads=args.heads,
                      num_key_value_heads=args.kv_heads, head_dim=args.hidden // args.heads,
                      max_position_embeddings=args.ctx, rms_norm_eps=1e-5, rope_theta=10000.0,
                      hidden_act="silu", attention_bias=False, mlp_bias=False, tie_word_embeddings=True,
                      bos_token_id=bos_id, eos_token_id=eos_id, pad_token_id=bos_id,
                      initializer_range=0.02)
    cfg._attn_implementation = "sdpa"
    return LlamaForCausalLM(cfg)


def lr_at(step, total, peak, warmup, floor=0.1):
    if step < warmup:
        return peak * (step + 1) / warmup
    t = min(1.0, (step - warmup) / max(1, total - warmup))
    return peak * (floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * t)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--corpus", required=True)
    ap.add_argument("--out", required=True, help="HF folder to write")
    ap.add_argument("--log", required=True, help="training log JSON to write")
    ap.add_argument("--tokenizer", help="reuse this tokenizer.json instead of training one")
    ap.add_argument("--vocab", type=int, default=8192)
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--ffn", type=int, default=768)
    ap.add_argument("--layers", type=int, default=10)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--kv-heads", type=int, default=2)
    ap.add_argument("--ctx", type=int, default=512)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--lr", type=float, default=1.5e-3)
    ap.add_argument("--warmup", type=int, default=300)
    ap.add_argument("--train-seconds", type=float, default=360)
    ap.add_argument("--max-steps", type=int, default=100000)
    ap.add_argument("--eval-every", type=int, default=500)
    ap.add_argument("--val-share", type=float, default=0.005)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--no-compile", action="store_true")
    args = ap.parse_args()
    import tokenizers
    import transformers
    versions = {"torch": torch.__version__, "transformers": transformers.__version__,
                "tokenizers": tokenizers.__version__, "cuda": torch.version.cuda,
                "gpu": torch.cuda.get_device_name(0)}
    log("versions", versions)
    random.seed(args.seed)
    torch.manual_seed(args.seed)
    report = {"args": vars(args), "versions": versions}

    text = open(args.corpus, encoding="utf-8").read()
    docs = [d for d in text.split(chat_format.BOS) if d.strip()]
    random.Random(args.seed).shuffle(docs)
    n_val = max(8, int(len(docs) * args.val_share))
    val_docs, train_docs = docs[:n_val], docs[n_val:]
    report["corpus"] = {"bytes": len(text.encode()), "docs": len(docs), "val_docs": n_val}
    log(f"corpus {len(text.encode())/1e6:.1f} MB, {len(docs)} docs ({n_val} held out)")

    t0 = time.time()
    if args.tokenizer:
        from tokenizers import Tokenizer
        tok = Tokenizer.from_file(args.tokenizer)
        report["tokenizer_source"] = "reused " + args.tokenizer
    else:
        tok = finish_tokenizer(train_tokenizer(train_docs + val_docs, args.vocab))
        report["tokenizer_source"] = "trained"
    report["tokenizer_seconds"] = round(time.time() - t0, 1)
    vocab = tok.get_vocab_size()
    bos_id, end_id = tok.token_to_id(chat_format.BOS), tok.token_to_id(chat_format.END)
    log(f"tokenizer: vocab {vocab}, bos {bos_id}, end {end_id}, {time.time()-t0:.1f}s")
    os.makedirs(args.out, exist_ok=True)
    save_tokenizer(tok, args.out)

    t0 = time.time()
    def encode(ds):
        ids = [e.ids for e in tok.encode_batch(ds, add_special_tokens=True)]
        return ids, np.fromiter((i for e in ids for i in e), dtype=np.int32)
    train_ids, train_arr = encode(train_docs)
    val_ids, val_arr = encode(val_docs)
    # byte-level BPE must reproduce every document exactly (checked on the held-out docs + a sample)
    check = list(zip(val_docs, val_ids)) + random.Random(1).sample(list(zip(train_docs, train_ids)), 500)
    bad = sum(tok.decode(i, skip_special_tokens=False) != chat_format.BOS + d for d, i in check)
    report["roundtrip_checked_docs"], report["roundtrip_mismatches"] = len(check), bad
    report["tokens"] = {"train": int(train_arr.size), "val": int(val_arr.size),
                        "bytes_per_token": round(len(text.encode()) / (train_arr.size + val_arr.size), 3)}
    log(f"tokenized in {time.time()-t0:.1f}s: train {train_arr.size} val {val_arr.size} tokens, "
        f"round-trip mismatches {bad}/{len(check)}")

    dev = torch.device("cuda")
    model = build_model(args, vocab, bos_id, end_id).to(dev)
    n_params = sum(p.numel() for p in model.parameters())
    report["parameters"] = n_params
    log(f"model: {n_params} parameters (tied embeddings)")
    train_t = torch.from_numpy(train_arr.astype(np.int64)).to(dev)
    val_t = torch.from_numpy(val_arr.astype(np.int64)).to(dev)
    T = args.ctx
    n_vwin = min(128, (val_t.numel() - 1) // T)
    val_x = torch.stack([val_t[i * T:i * T + T] for i in range(n_vwin)])
    val_y = torch.stack([val_t[i * T + 1:i * T + T + 1] for i in range(n_vwin)])
    ar = torch.arange(T + 1, device=dev)

    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=args.lr, betas=(0.9, 0.95), eps=1e-8, fused=True)
    fwd = model if args.no_compile else torch.compile(model)

    def loss_of(m, x, y):
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits = m(input_ids=x).logits
        return F.cross_entropy(logits.float().view(-1, logits.size(-1)), y.reshape(-1))

    @torch.no_grad()
    def evaluate():
        model.eval()
        tot = 0.0
        for i in range(0, n_vwin, 32):
            tot += loss_of(fwd, val_x[i:i + 32], val_y[i:i + 32]).item() * val_x[i:i + 32].size(0)
        model.train()
        return tot / n_vwin

    curve, best, best_state = [], float("inf"), None
    total_steps, step, t_start, ema = args.max_steps, 0, time.time(), None
    compiled = not args.no_compile
    while step < total_steps:
        for g in opt.param_groups:
            g["lr"] = lr_at(step, total_steps, args.lr, args.warmup)
        offs = torch.randint(0, train_t.numel() - T - 1, (args.batch,), device=dev)
        win = train_t[offs[:, None] + ar]
        try:
            loss = loss_of(fwd, win[:, :-1], win[:, 1:])
        except Exception as e:  # torch.compile trouble: fall back to eager, once
            if not compiled:
                raise
            log(f"compile failed ({type(e).__name__}: {str(e)[:200]}); eager from here")
            fwd, compiled = model, False
            loss = loss_of(fwd, win[:, :-1], win[:, 1:])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        gnorm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        step += 1
        if step == 30:
            torch.cuda.synchronize()
            t30 = time.time()
        if step == 80:
            torch.cuda.synchronize()
            per = (time.time() - t30) / 50
            left = args.train_seconds - (time.time() - t_start)
            evals = 1.0 + 0.02  # evaluation overhead allowance
            total_steps = min(args.max_steps, 80 + int(left / (per * evals)))
            report["step_seconds"] = round(per, 4)
            log(f"{per*1000:.1f} ms/step, {args.batch*T/per/1e6:.2f} M tok/s -> {total_steps} steps")
        if step % 50 == 0 or step == total_steps:
            lv = loss.item()
            ema = lv if ema is None else 0.9 * ema + 0.1 * lv
            rec = {"step": step, "loss": round(lv, 4), "lr": round(opt.param_groups[0]["lr"], 6),
                   "gnorm": round(float(gnorm), 3), "seconds": round(time.time() - t_start, 1)}
            if step % args.eval_every == 0 or step == total_steps:
                rec["val_loss"] = round(evaluate(), 4)
                if rec["val_loss"] < best:
                    best = rec["val_loss"]
                    best_state = {k: v.detach().clone() for k, v in model.state_dict().items()}
                    rec["best"] = True
                log(json.dumps(rec))
            curve.append(rec)
    report["steps"] = step
    report["epochs"] = round(step * args.batch * T / train_arr.size, 2)
    report["train_seconds"] = round(time.time() - t_start, 1)
    report["compiled"] = compiled
    report["best_val_loss"] = best
    report["curve"] = curve
    if best_state is not None:
        model.load_state_dict(best_state)
    model = model.to(torch.float16)
    model.config.dtype = "float16"
    model.generation_config.bos_token_id = bos_id
    model.generation_config.eos_token_id = [end_id, bos_id]
    model.generation_config.pad_token_id = bos_id
    model.generation_config.do_sample = True
    model.generation_config.temperature = 0.7
    model.generation_config.top_k = 40
    model.generation_config.top_p = 0.9
    model.generation_config.max_length = args.ctx
    model.save_pretrained(args.out, safe_serialization=True)
    json.dump(report, open(args.log, "w"), indent=1)
    log(f"saved {args.out}: {sorted(os.listdir(args.out))}")


if __name__ == "__main__":
    main()
