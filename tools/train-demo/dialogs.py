"""Instruction-shaped (question, answer) pairs built from the documentation's own structure.

Owns: turning Docs into honest Q/A pairs, where every answer is text the source itself gives
for that question: a section heading -> the section's first paragraph; an FAQ question ->
its answer; an API entry -> its description; a manual page's NAME line; a Jargon File entry;
a WordNet gloss; a novel's paragraph -> the paragraph that follows it. Nothing is invented.
"""
import random
import re

GENERIC = {"name", "synopsis", "description", "options", "examples", "example", "notes", "note",
           "see also", "introduction", "overview", "contents", "table of contents", "index",
           "parameters", "return value", "compatibility", "history", "bugs", "author", "authors",
           "files", "environment", "diagnostics", "configuration", "discussion", "git", "summary",
           "reporting bugs", "copyright", "license", "footnotes", "other", "usage", "details",
           "caveats", "availability", "warning", "tip", "important", "preface", "foreword",
           "acknowledgments", "acknowledgements", "abstract", "exit status", "return values",
           "outputs", "inputs", "arguments", "errors", "limitations", "miscellaneous", "api",
           "reference", "functions", "methods", "attributes", "classes", "constants", "exceptions",
           "settings", "definitions", "syntax", "background", "motivation", "resources", "glossary"}

SYSTEM_PROMPTS = [
    "You are a helpful assistant that answers questions about free software and its documentation.",
    "You are a concise assistant. Answer in plain English.",
    "Answer the user's question using what the documentation says.",
]


def clean_heading(t):
    """Drops chapter/section numbering ("6.2.1. ", "Chapter 3. ", "A.1. ") from a heading."""
    t = re.sub(r"^(chapter|appendix|part|section)\s+[\w.]+\s*[.:]?\s*", "", t, flags=re.I)
    t = re.sub(r"^(\d+(\.\d+)*\.?|[A-Z](\.\d+)+\.?|[A-Z]\.)\s+", "", t)
    return t.strip(" .:")


def good_answer(p):
    return (60 <= len(p) <= 900 and p[-1] in ".!?" and not p.startswith("* ")
            and sum(c.isalpha() for c in p) > 0.7 * len(p.replace(" ", "")))


def answer_from(blocks, i):
    """The prose that follows block i: first paragraph, plus the next when both are short."""
    parts = []
    for k, t in blocks[i + 1:i + 4]:
        if k != "p":
            break
        if not parts:
            if not good_answer(t) or t.endswith(":"):
                return None
            parts.append(t)
        elif len(parts[0]) + len(t) < 450 and good_answer(t) and not t.endswith(":"):
            parts.append(t)
        else:
            break
    return "\n\n".join(parts) if parts else None


def heading_question(rng, title, doc_title):
    if title.endswith("?"):
        return title
    low = title.lower()
    if low in GENERIC or len(title) < 3 or len(title) > 80 or not re.search(r"[A-Za-z]{3}", title):
        return None
    m = re.match(r"^([\w.]+) -- (.+)$", title)
    if m:
        return rng.choice([f"What is the Python module {m.group(1)} for?",
                           f"What does the {m.group(1)} module do?"])
    first = title.split()[0].lower()
    if first.endswith("ing") or first in ("how", "using", "working", "creating", "writing", "setting"):
        forms = [f"Tell me about {title[0].lower() + title[1:]}.", f"Explain {title[0].lower() + title[1:]}."]
    else:
        forms = [f"What is {title}?", f"Explain {title}.", f"Tell me about {title}.",
                 f"What does the documentation say about {title}?", f"Can you describe {title}?"]
    q = rng.choice(forms)
    if rng.random() < 0.3 and doc_title and doc_title != title and len(doc_title) < 60:
        q = q.rstrip("?.") + f" (in the context of {doc_title})" + q[-1]
    return q


def doc_pairs(rng, doc):
    """Q/A pairs from one Doc, by its kind."""
    pairs = []
    b = doc.blocks
    if doc.kind == "jargon":
        for k, t in b:
            t = re.sub(r"^\d+\.\s+", "", t)
            t = re.sub(r"^(n|v|vt|vi|adj|adv|interj)\.\s+", "", t)
            if good_answer(t) and not t.startswith("["):
                q = rng.choice([f"What does the hacker slang term \"{doc.title}\" mean?",
                                f"In the Jargon File, what is \"{doc.title}\"?",
                                f"Define the jargon term \"{doc.title}\"."])
                pairs.append((q, t))
                break
        return pairs
    if doc.kind == "novel":
        paras = [t for k, t in b if k == "p" and 150 <= len(t) <= 900]
        for i in range(0, len(paras) - 1, 6):
            q = f"Continue this passage from {doc.title} by Jane Austen:\n\n{paras[i]}"
            pairs.append((q, paras[i + 1]))
        return pairs
    if doc.kind == "manpage":
        for i, (k, t) in enumerate(b[:-1]):
            if k.startswith("h") and t.strip().upper() == "NAME" and b[i + 1][0] == "p":
                m = re.match(r"^(git[\w-]*)\s+-\s+(.+)$", b[i + 1][1])
                if m:
                    cmd = m.group(1).replace("git-", "git ", 1)
                    desc = m.group(2).rstrip(".") + "."
                    rest = next((t2 for k2, t2 in b[i + 2:i + 12] if k2 == "p" and good_answer(t2)
                                 and not t2.startswith(("git", "[", "*"))), None)
                    a = f"{cmd}: {desc}" + (f"\n\n{rest}" if rest and len(rest) < 600 else "")
                    pairs.append((rng.choice([f"What does {cmd} do?", f"What is {cmd} used for?"]), a))
                break
    for what, ident, sig, desc in doc.extra.get("functions", []):
        if good_answer(desc):
            lang = "Django" if doc.source == "python-django-doc" else "Python"
            short = ident.split(".")[-1] if lang == "Django" else ident
            noun = {"function": "function", "method": "method", "class": "class",
                    "exception": "exception"}[what]
            q = rng.choice([f"What does the {lang} {noun} {short} do?", f"In {lang}, what is {ident}?",
                            f"Explain {ident} in {lang}."])
            pairs.append((q, f"{sig}\n\n{desc}" if len(sig) < 90 and rng.random() < 0.5 else desc))
    for i, (k, t) in enumerate(b[:-1]):
        if not k.startswith("h"):
            continue
        q = heading_question(rng, clean_heading(t), clean_heading(doc.title))
        if not q:
            continue
        a = answer_from(b, i)
        if a:
            pairs.append((q, a))
    return pairs


def wordnet_pairs(rng, entries):
    pairs = []
    for lemma, pos, sense, gloss in entries:
        parts = [g.strip() for g in gloss.split(";")]
        defs = [p for p in parts if p and not p.startswith('"')]
        exs = [p.strip('"') for p in parts if p.startswith('"') and p.count('"') == 2]
        if not defs:
            continue
        d = "; ".join(defs)
        art = "an" if pos[0] in "aeiou" else "a"
        a = f"As {art} {pos}, \"{lemma}\" means {d}."
        if exs:
            a += f" For example: \"{exs[0]}\"."
        q = rng.choice([f"What does the word \"{lemma}\" mean?", f"Define \"{lemma}\".",
                        f"What is the meaning of \"{lemma}\" as {art} {pos}?"])
        pairs.append((q, a))
    return pairs


def group_dialogs(rng, pairs, max_turns=3, system_frac=0.1):
    """Shuffled pairs grouped into dialogs of 1..max_turns exchanges (list of message lists)."""
    rng.shuffle(pairs)
    out, i = [], 0
    while i < len(pairs):
        n = rng.choice([1, 1, 1, 2, 2, 3][:max_turns * 2])
        msgs = []
        if rng.random() < system_frac:
            msgs.append({"role": "system", "content": rng.choice(SYSTEM_PROMPTS)})
        for q, a in pairs[i:i + n]:
            msgs += [{"role": "user", "content": q}, {"role": "assistant", "content": a}]
        out.append(msgs)
        i += n
    return out
