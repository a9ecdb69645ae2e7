#!/usr/bin/env python3
"""Compares our cleaned Wikipedia text with wikiextractor's on the same dump.

    wikiprep_quality.py OURS THEIRS [--name NAME] [--json OUT.json] [--worst K] [--dump DUMP]

OURS and THEIRS are JSON-lines documents ({"id","title","text",…}): files (.jsonl, .jsonl.bz2,
.jsonl.zst) or directories of them (wikiprep's docs-*.jsonl.zst shards). .zst is read with the
`zstandard` module when it is installed, else through `zstd -dc`.

wikiextractor's quirks are undone first (/work/shared/data/wikipedia/README.md): its text is
HTML-escaped, its titles keep XML escapes, redirects come out with empty text, and ns-0 titles
with ':' are missing; so the comparison is over ns-0 non-redirect articles, ours without ':'
titles, theirs without empty redirect records (with --dump: without any record of a redirect or
non-ns-0 page). formula_N / codice_N placeholders are not words.

Prints: articles in both / only ours / only theirs; per article word recall of their words in ours
(mean, 5th percentile) and precision (ours they also have); and, over the articles in both, the
markup each side leaks, per pattern. Words are \\w+ runs, with every CJK character a word of its
own (Japanese has no spaces), compared as multisets.
"""
import argparse
import bz2
import collections
import html
import io
import json
import os
import re
import subprocess
import sys

LEAKS = ["{{", "}}", "[[", "]]", "{|", "|}", "<ref", "&lt;ref", "</", "&amp;", "&nbsp;", "'''",
         "__TOC__", "formula_", "codice_", "()"]
EMPTY_PARENS = re.compile(r"\(\s*\)")
CJK = re.compile(r"([\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff66-\uff9f\uac00-\ud7af])")
WORD = re.compile(r"\w+")
PLACEHOLDER = re.compile(r"^(formula|codice)_\d+$")


def open_text(path):
    with open(path, "rb") as f:
        magic = f.read(4)
    if magic[:3] == b"BZh":
        return io.TextIOWrapper(bz2.open(path, "rb"), encoding="utf-8")
    if magic == b"\x28\xb5\x2f\xfd":
        try:
            import zstandard
            return io.TextIOWrapper(zstandard.ZstdDecompressor().stream_reader(open(path, "rb")),
                                    encoding="utf-8")
        except ImportError:
            p = subprocess.Popen(["zstd", "-dc", path], stdout=subprocess.PIPE)
            return io.TextIOWrapper(p.stdout, encoding="utf-8")
    return open(path, encoding="utf-8")


def files_of(path):
    if not os.path.isdir(path):
        return [path]
    found = []
    for d, _, names in os.walk(path):
        found += [os.path.join(d, n) for n in names if ".jsonl" in n]
    return sorted(found)


def read_docs(path):
    docs = {}
    for f in files_of(path):
        with open_text(f) as stream:
            for line in stream:
                if line.strip():
                    d = json.loads(line)
                    docs[str(d.get("id", ""))] = d
    return docs


def words(text):
    return [w for w in WORD.findall(CJK.sub(r" \1 ", text)) if not PLACEHOLDER.match(w)]


def leak_counts(texts):
    counts = collections.Counter()
    for t in texts:
        for pattern in LEAKS:
            counts[pattern] += len(EMPTY_PARENS.findall(t)) if pattern == "()" else t.count(pattern)
    return counts


def percentile(values, p):
    if not values:
        return float("nan")
    s = sorted(values)
    return s[min(len(s) - 1, int(p / 100 * len(s)))]


def non_articles(dump):
    """Ids of the dump's pages that are no ns-0 articles (redirects, other namespaces)."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import extract_wikitext
    return {p["id"] for p, _ in extract_wikitext.pages(dump) if p["ns"] != "0" or p["redirect"]}


def compare(ours_path, theirs_path, worst=0, dump=None):
    ours = read_docs(ours_path)
    theirs = read_docs(theirs_path)
    for d in theirs.values():  # undo wikiextractor's escaping
        d["text"] = html.unescape(d.get("text", ""))
        d["title"] = html.unescape(d.get("title", ""))
    ours = {k: d for k, d in ours.items() if ":" not in d.get("title", "")}
    # Redirects: their records with empty text that we do not have (we have no redirects).
    theirs = {k: d for k, d in theirs.items() if d["text"].strip() or k in ours}
    # wikiextractor 3.0.7 gives some pages a wrong id (elwikivoyage: the id of a neighbouring
    # page, with raw XML as text); pair what the ids leave unpaired by title.
    by_title = {d.get("title", ""): k for k, d in theirs.items() if k not in ours}
    retitled = 0
    for k in sorted(set(ours) - set(theirs)):
        t = by_title.pop(ours[k].get("title", ""), None)
        if t is not None:
            theirs[k] = theirs.pop(t)
            retitled += 1
    # With the dump at hand, redirects are known for sure: wikiextractor sometimes gives one text
    # (wikidump-enwiki-10k's "Actinomeris squarrosa": a broken comment after #REDIRECT).
    redirects = sorted((non_articles(dump) & set(theirs)) - set(ours)) if dump else []
    for k in redirects:
        del theirs[k]
    both = sorted(set(ours) & set(theirs), key=lambda k: int(k) if k.isdigit() else k)
    # What is left of those mis-parsed pages (raw "<ns>…<revision>" as text, redirects among
    # them) is no article: counted apart, not as a set difference.
    misparsed = sorted(k for k in set(theirs) - set(ours) if "<revision>" in theirs[k]["text"])
    for k in misparsed:
        del theirs[k]
    recall, precision, rows = [], [], []
    for k in both:
        a, b = words(ours[k]["text"]), words(theirs[k]["text"])
        common = sum((collections.Counter(a) & collections.Counter(b)).values())
        r = common / len(b) if b else 1.0
        p = common / len(a) if a else 1.0
        recall.append(r)
        precision.append(p)
        rows.append((r, k, ours[k].get("title", ""), len(b)))
    result = {
        "both": len(both),
        "paired_by_title": retitled,
        "theirs_misparsed": misparsed,
        "theirs_redirects": redirects,
        "only_ours": sorted(set(ours) - set(theirs)),
        "only_theirs": sorted(set(theirs) - set(ours)),
        "recall_mean": sum(recall) / len(recall) if recall else float("nan"),
        "recall_p5": percentile(recall, 5),
        "precision_mean": sum(precision) / len(precision) if precision else float("nan"),
        "leaks_ours": leak_counts(ours[k]["text"] for k in both),
        "leaks_theirs": leak_counts(theirs[k]["text"] for k in both),
        "worst": sorted(rows)[:worst],
    }
    return result


def goal_failures(name, r, articles=None):
    """The issue's quality goals for one sample, as a list of failures (empty: all met): the same
    article set (of `articles` when given), recall mean >= 0.97 and 5th percentile >= 0.90, and
    fewer leaks than wikiextractor in every column (none where it leaks none)."""
    failures = []
    if r["only_ours"] or r["only_theirs"] or (articles is not None and r["both"] != articles):
        failures.append(f"{name}: article sets differ: both {r['both']} (want {articles}), "
                        f"only ours {r['only_ours'][:10]}, only theirs {r['only_theirs'][:10]}")
    if not r["recall_mean"] >= 0.97:
        failures.append(f"{name}: recall mean {r['recall_mean']:.4f} < 0.97")
    if not r["recall_p5"] >= 0.90:
        failures.append(f"{name}: recall p5 {r['recall_p5']:.4f} < 0.90")
    for pattern in LEAKS:
        o, t = r["leaks_ours"][pattern], r["leaks_theirs"][pattern]
        if not (o < t or o == t == 0):
            failures.append(f"{name}: leaks {pattern!r}: ours {o}, theirs {t}")
    return failures


def print_table(name, r, out=sys.stdout):
    print(f"== {name}", file=out)
    print(f"articles: both {r['both']} ({r['paired_by_title']} paired by title), only ours "
          f"{len(r['only_ours'])}, only theirs {len(r['only_theirs'])}"
          f"{', their misparsed pages left out ' + str(len(r['theirs_misparsed'])) if r['theirs_misparsed'] else ''}"
          f"{', their redirect records left out ' + str(len(r['theirs_redirects'])) if r['theirs_redirects'] else ''}",
          file=out)
    for label in ("only_ours", "only_theirs"):
        if r[label]:
            print(f"  {label}: {' '.join(r[label][:20])}{' …' if len(r[label]) > 20 else ''}", file=out)
    print(f"recall mean {r['recall_mean']:.4f}  p5 {r['recall_p5']:.4f}   precision mean "
          f"{r['precision_mean']:.4f}", file=out)
    width = max(len(p) for p in LEAKS) + 2
    print("leaks".ljust(width) + "ours".rjust(8) + "theirs".rjust(8), file=out)
    for p in LEAKS:
        print(p.ljust(width) + str(r["leaks_ours"][p]).rjust(8) + str(r["leaks_theirs"][p]).rjust(8),
              file=out)
    print("total".ljust(width) + str(sum(r["leaks_ours"].values())).rjust(8) +
          str(sum(r["leaks_theirs"].values())).rjust(8), file=out)
    for rec, k, title, n in r["worst"]:
        print(f"  worst recall {rec:.3f}  id {k}  {title}  ({n} words theirs)", file=out)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("ours")
    ap.add_argument("theirs")
    ap.add_argument("--name", default=None)
    ap.add_argument("--json", help="also write the numbers here")
    ap.add_argument("--worst", type=int, default=0, help="list the K articles of lowest recall")
    ap.add_argument("--dump", help="the XML dump both came from: its redirects are left out for sure")
    args = ap.parse_args()
    r = compare(args.ours, args.theirs, args.worst, args.dump)
    print_table(args.name or os.path.basename(args.theirs), r)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({**r, "leaks_ours": dict(r["leaks_ours"]), "leaks_theirs": dict(r["leaks_theirs"])},
                      f, indent=1)


if __name__ == "__main__":
    main()
