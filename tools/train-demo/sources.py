"""Text extraction from the Debian packages that make up the demo-model corpus.

Owns: turning each package's installed documentation (HTML, POD, the Jargon File's text,
R data, WordNet's database) into Doc objects: a title plus an ordered list of blocks
(('h1'..'h6' | 'p' | 'pre'), text). Rendering and dialog building live in prepare_data.py
and dialogs.py. Every source here is DFSG-free; SOURCES lists the package and its license.
"""
import glob
import gzip
import os
import re
import unicodedata
from dataclasses import dataclass, field

import lxml.html

import rdata

# package -> (license as stated in /usr/share/doc/<package>/copyright, what it is)
SOURCES = {
    "python3.11-doc": ("PSF-2.0 (Python Software Foundation License)", "Python 3.11 documentation"),
    "python-django-doc": ("BSD-3-Clause", "Django web framework documentation"),
    "postgresql-doc-15": ("PostgreSQL License (BSD-style)", "PostgreSQL 15 manual"),
    "sqlite3-doc": ("public domain", "SQLite documentation"),
    "perl-doc": ("GPL-1+ or Artistic", "Perl 5.36 documentation (POD), incl. the perlfaq"),
    "git-doc": ("GPL-2", "Git manual pages and user manual"),
    "debian-handbook": ("GPL-2+ or CC-BY-SA-3.0", "The Debian Administrator's Handbook (en-US)"),
    "debian-reference-en": ("GPL-2+", "Debian Reference (English)"),
    "debian-faq": ("verbatim/modified copies permitted (SPI notice)", "The Debian GNU/Linux FAQ"),
    "debian-policy": ("GPL-2+", "Debian Policy Manual"),
    "developers-reference": ("GPL-2", "Debian Developer's Reference"),
    "maint-guide": ("GPL-2+ / MIT", "Debian New Maintainers' Guide"),
    "gnu-standards": ("GFDL-1.3+, no invariant sections", "GNU Coding Standards, Information for GNU Maintainers"),
    "bash-doc": ("GFDL-1.3 no invariant sections (manual)", "Bash Reference Manual"),
    "jargon-text": ("public domain", "The Jargon File 4.4.7"),
    "r-cran-janeaustenr": ("public-domain texts (package MIT)", "Jane Austen's six completed novels"),
    "wordnet-base": ("WordNet 3.0 license (BSD-style)", "WordNet 3.0 English dictionary glosses"),
}

TYPO = str.maketrans({"\u2018": "'", "\u2019": "'", "\u201c": '"', "\u201d": '"', "\u2013": "-",
                      "\u2014": "--", "\u2026": "...", "\u00a0": " ", "\u00b6": "", "\u200b": "",
                      "\ufeff": "", "\u00ad": "", "\u2011": "-", "\u2212": "-", "\u2022": "*"})


def clean(s, keep_lines=False):
    s = unicodedata.normalize("NFC", s).translate(TYPO)
    s = "".join(c for c in s if c in "\n\t" or unicodedata.category(c)[0] != "C")
    if keep_lines:
        lines = [ln.rstrip().replace("\t", "    ") for ln in s.split("\n")]
        while lines and not lines[0].strip():
            lines.pop(0)
        while lines and not lines[-1].strip():
            lines.pop()
        return "\n".join(lines)
    return re.sub(r"\s+", " ", s).strip()


@dataclass
class Doc:
    source: str
    title: str
    blocks: list = field(default_factory=list)  # [(kind, text)], kind in h1..h6, p, pre
    kind: str = "doc"  # doc | manpage | faq | function | jargon | novel | dictionary
    extra: dict = field(default_factory=dict)


# ---------------------------------------------------------------- HTML
DROP_CLASS = re.compile(r"(^|[\s_-])(nav\w*|sidebar\w*|related|footer|breadcrumbs?|mobile-nav|headerlink|"
                        r"docnav|nosearch|searchbox|toc|genindex|footnotes|copyright|legalnotice|"
                        r"menu|rellinks|side)($|[\s_-])", re.I)
BLOCK = {"p", "h1", "h2", "h3", "h4", "h5", "h6", "pre", "dt", "li", "dd", "blockquote", "div",
         "section", "dl", "ul", "ol", "article", "main", "body", "td", "th", "tr", "tbody", "table", "br",
         "hr", "figure", "aside", "center"}
HEADINGS = {"h1", "h2", "h3", "h4", "h5", "h6"}


def html_blocks(path, root_xpath=None):
    """(title, blocks) of one HTML page: headings, prose paragraphs and <pre> blocks, in order.

    Inline runs inside containers (publican's <div class="para">, text mixed with lists) are
    gathered and flushed as one paragraph when a block element starts, so no words are lost."""
    try:
        root = lxml.html.parse(path).getroot()
    except (OSError, ValueError) as e:
        raise ValueError(f"{path}: cannot parse HTML: {e}") from e
    if root is None:
        return "", []
    title_el = root.xpath("//title")
    title = clean(title_el[0].text_content()) if title_el else os.path.basename(path)
    for bad in root.xpath("//script|//style|//table|//head|//nav|//header|//footer|//form|//img"
                          "|//a[@class='headerlink']|//sup[@class='footnote']"):
        bad.drop_tree()
    for el in root.xpath("//*[@class or @id or @role]"):
        cid = " ".join(filter(None, [el.get("class"), el.get("id"), el.get("role")]))
        if DROP_CLASS.search(cid) and el.getparent() is not None:
            el.drop_tree()
    body = root.find("body")
    if body is None:
        return title, []
    start = body
    if root_xpath:
        hits = body.xpath(root_xpath)
        if hits:
            start = hits[0]
    blocks, buf = [], []

    def flush(prefix=""):
        txt = clean("".join(buf))
        buf.clear()
        if txt:
            blocks.append(("p", prefix + txt))

    def walk(el, prefix=""):
        tag = el.tag if isinstance(el.tag, str) else ""
        if tag == "pre":
            flush()
            txt = clean(el.text_content(), keep_lines=True)
            if txt:
                blocks.append(("pre", txt))
            return
        if tag in HEADINGS:
            flush()
            txt = clean(el.text_content())
            if txt:
                blocks.append((tag, txt))
            return
        if el.text:
            buf.append(el.text)
        for c in el:
            ctag = c.tag if isinstance(c.tag, str) else ""
            if ctag in BLOCK or ctag in HEADINGS:
                flush(prefix)
                prefix = ""
                walk(c, "* " if ctag == "li" else "")
                flush("* " if ctag == "li" else "")
            elif ctag:
                # inline element: its text and any blocks nested inside it
                if any(isinstance(g.tag, str) and g.tag in BLOCK for g in c.iter()):
                    walk(c)
                else:
                    buf.append(c.text_content())
            if c.tail:
                buf.append(c.tail)

    walk(start)
    flush()
    return title, blocks


def _functions(path):
    """Sphinx API entries (dl.py.function/method/class): name and first paragraph."""
    out = []
    try:
        root = lxml.html.parse(path).getroot()
    except (OSError, ValueError):
        return out
    for dl in root.xpath("//dl[contains(concat(' ', @class, ' '), ' py ')]"):
        cls = dl.get("class", "")
        what = next((w for w in ("function", "method", "class", "exception") if f" {w}" in f" {cls}"), None)
        dt, dd = dl.find("dt"), dl.find("dd")
        if what is None or dt is None or dd is None or not dt.get("id"):
            continue
        p = dd.find("p")
        if p is None:
            continue
        out.append((what, dt.get("id"), clean(dt.text_content()), clean(p.text_content())))
    return out


def html_docs(source, paths, root_xpath=None, kind="doc", functions=False):
    for path in sorted(paths):
        title, blocks = html_blocks(path, root_xpath)
        if blocks:
            d = Doc(source, re.sub(r"\s+(--|-|\|)\s+.*$", "", title), blocks, kind)
            if functions:
                d.extra["functions"] = _functions(path)
            yield d


# ---------------------------------------------------------------- POD
POD_ESC = {"lt": "<", "gt": ">", "verbar": "|", "sol": "/", "quot": '"', "amp": "&", "apos": "'"}


def pod_inline(s):
    s = re.sub(r"[A-Z]<<+\s+(.*?)\s+>>+", lambda m: m.group(1), s, flags=re.S)
    for _ in range(6):
        s2 = re.sub(r"E<([^<>]*)>", lambda m: POD_ESC.get(m.group(1), ""), s)
        s2 = re.sub(r"L<([^<>|]*)\|[^<>]*>", r"\1", s2)
        s2 = re.sub(r"L<\"?([^<>\"]*)\"?>", lambda m: m.group(1).replace("/", " ").strip(), s2)
        s2 = re.sub(r"[XZ]<[^<>]*>", "", s2)
        s2 = re.sub(r"[BCIFS]<([^<>]*)>", r"\1", s2)
        if s2 == s:
            break
        s = s2
    return s


def pod_doc(path):
    text = open(path, encoding="utf-8", errors="replace").read()
    blocks, title, in_pod, skip = [], os.path.basename(path)[:-4], True, False
    for para in re.split(r"\n[ \t]*\n", text):
        if not para.strip():
            continue
        if para.startswith("="):
            cmd, _, rest = para.partition(" ")
            cmd = cmd.strip()
            rest = pod_inline(rest.strip())
            if cmd in ("=begin", "=for"):
                skip = cmd == "=begin"
            elif cmd == "=end":
                skip = False
            elif cmd == "=cut":
                in_pod = False
            elif cmd == "=pod":
                in_pod = True
            elif cmd.startswith("=head") and not skip:
                in_pod = True
                lvl = min(int(cmd[5:] or 1) + 1, 6)
                blocks.append((f"h{lvl}", clean(rest)))
            elif cmd == "=item" and not skip and rest not in ("*", ""):
                blocks.append(("p", clean(rest)))
            continue
        if not in_pod or skip:
            continue
        if para[0] in " \t":
            blocks.append(("pre", clean(para, keep_lines=True)))
        else:
            blocks.append(("p", clean(pod_inline(para))))
    for i, (k, t) in enumerate(blocks[:-1]):
        if k == "h2" and t == "NAME" and blocks[i + 1][0] == "p":
            title = blocks[i + 1][1]
            break
    kind = "faq" if os.path.basename(path).startswith("perlfaq") else "doc"
    return Doc("perl-doc", title, blocks, kind)


# ---------------------------------------------------------------- plain text sources
def jargon_docs(path="/usr/share/doc/jargon-text/jargon.txt.gz"):
    lines = gzip.open(path, "rt", encoding="utf-8").read().split("\n")
    head = re.compile(r"^   :([^:]+):\s*(.*)$")
    cur = None
    for ln in lines:
        m = head.match(ln)
        if m:
            if cur:
                yield cur
            cur = [m.group(1).strip(), m.group(2), []]
        elif cur is not None:
            if ln.strip().startswith("Glossary") or ln.startswith("Appendix"):
                yield cur
                cur = None
            else:
                cur[2].append(ln.strip())
    if cur:
        yield cur


def jargon_doc_list():
    out = []
    for term, gram, body in jargon_docs():
        paras = [clean(re.sub(r"[{}]", "", p)) for p in "\n".join(body).split("\n\n")]
        paras = [p for p in paras if p]
        if not paras:
            continue
        gram = re.sub(r"/[^/]*/,?\s*", "", gram).strip(" ,")
        d = Doc("jargon-text", term, [("p", p) for p in paras], "jargon", {"gram": gram})
        out.append(d)
    return out


def austen_docs(path="/usr/lib/R/site-library/janeaustenr/data/Rdata.rdb"):
    for lines in rdata.read_rdb_objects(path):
        if not isinstance(lines, list) or len(lines) < 1000:
            continue
        title = clean(lines[0]).title()
        paras, cur = [], []
        for ln in lines:
            ln = (ln or "").strip()
            if ln:
                cur.append(ln)
            elif cur:
                paras.append(clean(" ".join(cur)))
                cur = []
        if cur:
            paras.append(clean(" ".join(cur)))
        blocks = [("h2" if re.match(r"^(CHAPTER|Chapter|VOLUME)\b", p) else "p", p) for p in paras]
        # one Doc per chapter keeps documents a trainable size
        chap = []
        for b in blocks:
            if b[0] == "h2" and len(chap) > 3:
                yield Doc("r-cran-janeaustenr", title, chap, "novel")
                chap = []
            chap.append(b)
        if chap:
            yield Doc("r-cran-janeaustenr", title, chap, "novel")


def wordnet_entries(root="/usr/share/wordnet"):
    """(lemma, pos, gloss) for the senses of words that occur in WordNet's tagged corpus."""
    pos_name = {"noun": "noun", "verb": "verb", "adj": "adjective", "adv": "adverb"}
    for pos, name in pos_name.items():
        common = {}
        for ln in open(f"{root}/index.{pos}", encoding="utf-8"):
            if ln.startswith(" "):
                continue
            f = ln.split()
            p_cnt = int(f[3])
            tagsense = int(f[5 + p_cnt])
            offsets = f[6 + p_cnt:]
            for i, off in enumerate(offsets[:tagsense]):
                common.setdefault(off, (f[0], i))
        for ln in open(f"{root}/data.{pos}", encoding="utf-8"):
            if ln.startswith(" ") or "|" not in ln:
                continue
            off = ln[:8]
            if off not in common:
                continue
            lemma, sense = common[off]
            if "_" in lemma and lemma.count("_") > 1:
                continue
            gloss = clean(ln.split("|", 1)[1])
            yield lemma.replace("_", " "), name, sense, gloss


def collect_all():
    """Yields every Doc of every source (order: source by source)."""
    py = "/usr/share/doc/python3.11/html"
    yield from html_docs("python3.11-doc",
                         [p for p in glob.glob(f"{py}/**/*.html", recursive=True)
                          if "/_" not in p and "genindex" not in p and "whatsnew/changelog" not in p
                          and "py-modindex" not in p and not p.endswith("search.html")],
                         "//div[@role='main']", functions=True)
    dj = "/usr/share/doc/python-django-doc/html"
    yield from html_docs("python-django-doc",
                         [p for p in glob.glob(f"{dj}/**/*.html", recursive=True)
                          if "/_" not in p and "/releases/" not in p and "genindex" not in p
                          and "py-modindex" not in p and not p.endswith("search.html")],
                         "//div[@id='bd']", functions=True)
    yield from html_docs("postgresql-doc-15", [p for p in glob.glob("/usr/share/doc/postgresql-doc-15/html/*.html")
                                               if "/release-" not in p and "bookindex" not in p])
    yield from html_docs("sqlite3-doc", [p for p in glob.glob("/usr/share/doc/sqlite3/*.html")
                                         if "releaselog" not in p and "changes" not in p])
    for p in sorted(glob.glob("/usr/share/perl/5.36.0/pod/*.pod")):
        b = os.path.basename(p)
        if re.match(r"perl\d+delta|perltoc|perlhist|perlartistic|perlgpl|perlapi|perlintern|perlmodlib", b):
            continue
        yield pod_doc(p)
    yield from html_docs("git-doc", [p for p in glob.glob("/usr/share/doc/git-doc/*.html")
                                     if "RelNotes" not in p], kind="manpage")
    yield from html_docs("debian-handbook", glob.glob("/usr/share/doc/debian-handbook/html/en-US/*.html"))
    yield from html_docs("debian-reference-en", glob.glob("/usr/share/debian-reference/*.en.html"))
    yield from html_docs("debian-faq", glob.glob("/usr/share/doc/debian/FAQ/*.en.html"), kind="faq")
    yield from html_docs("debian-policy", glob.glob("/usr/share/doc/debian-policy/policy.html/*.html"))
    yield from html_docs("developers-reference",
                         glob.glob("/usr/share/developers-reference/*.html")
                         + glob.glob("/usr/share/doc/developers-reference/**/*.html", recursive=True))
    yield from html_docs("maint-guide", glob.glob("/usr/share/doc/maint-guide/html/*.en.html"))
    yield from html_docs("gnu-standards", glob.glob("/usr/share/doc/gnu-standards/*.html"))
    yield from html_docs("bash-doc", ["/usr/share/doc/bash/bashref.html"])
    yield from jargon_doc_list()
    yield from austen_docs()
