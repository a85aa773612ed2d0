#!/usr/bin/env python3
"""Writes inputs.txt: the differential test strings run through llama.cpp (gen_llamacpp.cpp) and
through our tokenizer (llamacpp_differential_test.cpp). Deterministic (seeded). Format as
llama.cpp's test-tokenizer-0 .inp: each string followed by "\\n__ggml_vocab_test__\\n"."""
import random

SEP = "\n__ggml_vocab_test__\n"
rng = random.Random(20261129)

# Character pools: scripts, digits of other systems, marks, spaces of every kind, emoji + ZWJ.
POOLS = [
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ",
    "0123456789",
    "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~",
    " ", "  ", "\t", "\n", "\r\n", "\r", "\v\f",
    "\u00a0\u2002\u2003\u2009\u200a\u3000\u2028\u2029\u0085\u1680\u202f\u205f",
    "\u00e9\u00e0\u00fc\u00f1\u00e7\u00c4\u00d6\u00df\u0153\u00f8",
    "\u0301\u0308\u0327\u0303\u20dd",                # combining marks
    "\u043d\u0435\u0449\u043e\u0411\u044a\u043b\u0433\u0430\u0440\u0441\u043a\u0438",
    "\u03b1\u03b2\u03b3\u0394\u03a9\u1f7d\u1fbe",
    "\u6211\u60f3\u5728\u5de5\u4f5c\u5929\u4e2d\u6587\u5b57",
    "\u3042\u3044\u3046\u30ab\u30bf\u30ca\uff71",
    "\ud55c\uad6d\uc5b4\u1100\u1161",
    "\u1780\u17b6\u1793\u17cb\u178f\u17c2\u1796\u17b7\u179f\u17c1",
    "\u0627\u0644\u0639\u0631\u0628\u064a\u0629\u0660\u0661\u0662",
    "\u0928\u092e\u0938\u094d\u0924\u0947\u0966\u0967",
    "\u00b2\u00bd\u2167\u2460\u00b5\u2126\u212a\u017f",
    "\uff01\uff1f\uff0c\u3002\u3001\u300c\u300d\u2018\u2019\u201c\u201d\u2014\u2026\uff5e",
    "\U0001f680\U0001f999\U0001f601\u2705\U0001f636\u200d\U0001f32b\ufe0f\U0001f468\u200d\U0001f469",
    "\u200b\u200c\u200d\u2060\ufeff\u00ad",
    "$+<=>^~|`",
]
WORDS = ["Hello", "world", "the", "I've", "it's", "'RE", "'m", "we'LL", "don't", "3.14",
         "1234567", "x=y+1;", "def f():", "    return", "<html>", "a_b", "CamelCase", "URL://x.y"]
SPECIALS = ["<s>", "</s>", "<unk>", "<|endoftext|>", "<|end|>", "<|user|>", "<|assistant|>",
            "[CLS]", "[SEP]", "[MASK]", "[PAD]", "<fim_prefix>", "<fim_middle>", "<|padding|>",
            "<\uff5cbegin\u2581of\u2581sentence\uff5c>", ">>TITLE<<", "<SEP>", "\u2581"]

tests = []
for _ in range(160):
    n = rng.randint(1, 24)
    parts = []
    for _ in range(n):
        r = rng.random()
        if r < 0.25:
            parts.append(rng.choice(WORDS))
        elif r < 0.32:
            parts.append(rng.choice(SPECIALS))
        else:
            pool = rng.choice(POOLS)
            parts.append("".join(rng.choice(pool) for _ in range(rng.randint(1, 4))))
        if rng.random() < 0.5:
            parts.append(" ")
    tests.append("".join(parts))
# Special tokens with the spaces around them that LSTRIP/RSTRIP and the SPM prefix care about.
for s in SPECIALS:
    tests += [s, " " + s + " ", "a" + s + "b", s + "  x\n" + s, "Hello " + s + "\n\nworld  " + s]
# Long runs and digit groups.
tests += [" " * 37, "\n" * 9 + "x", "9" * 31, "a" * 200, "\t \t \n" * 7, "'s'S'T're'VE'm'LL'd" * 3]
with open("inputs.txt", "w", encoding="utf-8", newline="") as f:
    for t in tests:
        f.write(t + SEP)
print(len(tests), "tests")
