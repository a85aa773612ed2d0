#!/usr/bin/python3
"""Builds the demo-model training corpus from Debian documentation packages (runs on the dev box).

Owns: the corpus file: plain-text documents and chat-formatted dialogs, each starting with
<|endoftext|>, deduplicated, capped per source, shuffled; plus a JSON summary (bytes per
source, dialog share) that the model card quotes. Needs: the packages in sources.SOURCES and
python3-lxml, python3-jinja2 (Debian). Usage:
    tools/train-demo/prepare_data.py --out data-demo/corpus.txt
"""
import argparse
import hashlib
import json
import os
import random
import subprocess
import sys
from collections import Counter, defaultdict

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import chat_format  # noqa: E402
import dialogs  # noqa: E402
import sources  # noqa: E402

# Per-source caps on plain text (MB of rendered text) keep the big manuals from drowning the rest.
CAPS_MB = {"python3.11-doc": 5.8, "postgresql-doc-15": 4.5, "sqlite3-doc": 2.5, "perl-doc": 4.0,
           "python-django-doc": 3.4, "git-doc": 2.6}
MAX_PRE_LINES = 25


def render_doc(doc, seen):
    """Plain text of a Doc; paragraphs already seen anywhere in the corpus are dropped."""
    out = []
    for kind, text in doc.blocks:
        if kind == "pre" and text.count("\n") >= MAX_PRE_LINES:
            continue
        if len(text) >= 40:
            h = hashlib.blake2b(text.encode(), digest_size=12).digest()
            if h in seen:
                continue
            seen.add(h)
        out.append(text)
    if sum(len(t) for t in out) < 200:
        return None
    return "\n\n".join(out)


def ascii_share(s):
    return sum(c < "\x80" for c in s) / max(1, len(s))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--chat-share", type=float, default=0.25, help="target share of dialog bytes")
    ap.add_argument("--max-mb", type=float, default=40.0)
    args = ap.parse_args()
    missing = [p for p in sources.SOURCES
               if subprocess.run(["dpkg", "-s", p], capture_output=True).returncode != 0]
    if missing:
        sys.exit(f"prepare_data: missing Debian packages: {' '.join(missing)} (apt-get install them)")
    rng = random.Random(args.seed)

    texts = defaultdict(list)  # source -> [rendered text]
    pairs = defaultdict(list)  # source -> [(q, a)]
    seen = set()
    for doc in sources.collect_all():
        pairs[doc.source] += dialogs.doc_pairs(rng, doc)
        t = render_doc(doc, seen)
        if t and ascii_share(t) > 0.97:
            texts[doc.source].append(t)
    pairs["wordnet-base"] = dialogs.wordnet_pairs(rng, sources.wordnet_entries())

    for src, cap in CAPS_MB.items():
        docs = texts[src]
        rng.shuffle(docs)
        kept, total = [], 0
        for d in docs:
            if total + len(d) > cap * 1e6:
                continue
            kept.append(d)
            total += len(d)
        texts[src] = kept
    text_bytes = sum(len(t) for v in texts.values() for t in v)
    # dialogs: at most chat_share of the final corpus, with per-source limits so that no one
    # kind (e.g. dictionary glosses) dominates the assistant's style
    budget = args.chat_share / (1 - args.chat_share) * text_bytes
    limits = {"wordnet-base": 0.18, "jargon-text": 0.06, "r-cran-janeaustenr": 0.10}
    dialog_docs, dialog_src = [], Counter()
    all_pairs, seen_answers = [], set()
    for src, ps in pairs.items():
        rng.shuffle(ps)
        lim = limits.get(src, 0.35) * budget
        used = 0
        for q, a in ps:
            n = len(q) + len(a) + 40
            if a in seen_answers:  # the same page installed twice, or a repeated paragraph
                continue
            seen_answers.add(a)
            if used + n > lim:
                break
            used += n
            all_pairs.append((src, q, a))
    rng.shuffle(all_pairs)
    if sum(len(q) + len(a) + 40 for _, q, a in all_pairs) > budget:
        acc, cut = 0, 0
        for cut, (_, q, a) in enumerate(all_pairs):
            acc += len(q) + len(a) + 40
            if acc > budget:
                break
        all_pairs = all_pairs[:cut]
    by_src = defaultdict(list)
    for src, q, a in all_pairs:
        by_src[src].append((q, a))
    for src, ps in by_src.items():
        for msgs in dialogs.group_dialogs(rng, ps):
            dialog_docs.append(chat_format.render(msgs, bos=False))
            dialog_src[src] += len(dialog_docs[-1])

    docs = [t for v in texts.values() for t in v] + dialog_docs
    rng.shuffle(docs)
    body = "".join(chat_format.BOS + d.strip("\n") + "\n" for d in docs)
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w", encoding="utf-8") as f:
        f.write(body)
    summary = {
        "bytes": len(body.encode()),
        "documents": len(docs),
        "dialogs": len(dialog_docs),
        "dialog_bytes": sum(dialog_src.values()),
        "text_bytes_by_source": {k: sum(len(t) for t in v) for k, v in sorted(texts.items())},
        "dialog_bytes_by_source": dict(sorted(dialog_src.items())),
        "pairs_available_by_source": {k: len(v) for k, v in sorted(pairs.items())},
        "sha256": hashlib.sha256(body.encode()).hexdigest(),
    }
    with open(os.path.splitext(args.out)[0] + ".summary.json", "w") as f:
        json.dump(summary, f, indent=1)
    print(json.dumps(summary, indent=1))
    if len(body.encode()) > args.max_mb * 1e6:
        sys.exit(f"prepare_data: corpus is {len(body.encode()) / 1e6:.1f} MB > --max-mb {args.max_mb}")


if __name__ == "__main__":
    main()
