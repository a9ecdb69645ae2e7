#!/usr/bin/env python3
"""The peers and the quality measure of scripts/bench/dedup.sh (run by .venv/bin/python):

  dedup_peer.py corpus PAGES... --out FILE [--planted] [--mb N] [--seed S]
      documents from real pages (JSON lines, plain or .bz2; pages under 20 words left out).
      --planted: each page, then 0-3 copies with edits at known rates (word substitutions,
      deletions, boilerplate added), recorded in FILE.planted.json. --mb N: documents cut from the
      pages (50-400 words) with 30% of their words substituted, until N MB of JSON lines (speed).
  dedup_peer.py datatrove CORPUS --work DIR [--ngram 5 --bands 14 --rows 8]
      datatrove's MinHash pipeline as its example runs it (signatures, buckets, clusters, filter
      writing the kept documents), one task per step as LocalPipelineExecutor runs it on one
      machine; prints {"cpu_s", "wall_s", "clusters"} (clusters: lists of document indices).
  dedup_peer.py datasketch CORPUS [--ngram 5 --bands 14 --rows 8]
      datasketch's MinHash over our shingles, MinHashLSH with params=(bands, rows), candidates
      joined by union-find; prints the same.
  dedup_peer.py ours REPORT
      dedup's report as clusters (document index → the kept one); prints the same.
  dedup_peer.py evaluate CORPUS RESULT.json... [--threshold 0.8] [--ngram 5]
      the true Jaccard similarity of every pair at or above the threshold, computed exactly over the
      shingles (prefix filtering finds them all), then per result: recall (true pairs put in one
      cluster), precision (pairs in one cluster whose true similarity is at or above the threshold).

Shingles (the reference for the truth and datasketch's input): datatrove's simplify_text, words split
at spaces, n words joined by a space, xxh3-64 — as dedup computes them (datagen/dedup/shingles.h)."""
import argparse
import bz2
import json
import math
import os
import random
import resource
import struct
import sys
import time
from collections import defaultdict


def read_pages(paths):
    for path in paths:
        opener = bz2.open if path.endswith(".bz2") else open
        with opener(path, "rt", encoding="utf-8") as f:
            for line in f:
                if line.strip():
                    d = json.loads(line)
                    if len(d.get("text", "").split()) >= 20:
                        yield d


BOILERPLATE = ("This article is licensed under the Creative Commons Attribution-ShareAlike License and additional "
               "terms may apply. By using this site you agree to the Terms of Use and Privacy Policy. Retrieved from "
               "the online encyclopedia. Navigation menu personal tools not logged in talk contributions create "
               "account log in namespaces article talk variants views read edit view history more search").split()


def substitute(words, rate, rng, vocab):
    return [rng.choice(vocab) if rng.random() < rate else w for w in words]


def delete(words, rate, rng):
    return [w for w in words if rng.random() >= rate]


def planted_copy(text, rng, vocab):
    """A copy with edits at rates drawn from a range that spans the 0.8 threshold."""
    kind = rng.choice(["substitute", "delete", "boilerplate", "mixed"])
    lines = text.split("\n")
    edits = {"kind": kind}
    out = []
    sub = rng.choice([0.002, 0.005, 0.01, 0.02, 0.03, 0.05, 0.08, 0.12]) if kind in ("substitute", "mixed") else 0
    dele = rng.choice([0.002, 0.005, 0.01, 0.02, 0.03, 0.05, 0.08]) if kind in ("delete", "mixed") else 0
    for line in lines:
        w = line.split(" ")
        if sub:
            w = substitute(w, sub, rng, vocab)
        if dele:
            w = delete(w, dele, rng)
        out.append(" ".join(w))
    if kind in ("boilerplate", "mixed"):
        k = rng.choice([10, 25, 50, 100, 200])
        block = " ".join((BOILERPLATE * 5)[:k])
        out = [block] + out if rng.random() < 0.5 else out + [block]
        edits["boilerplate_words"] = k
    edits.update(substitution_rate=sub, deletion_rate=dele)
    return "\n".join(out), edits


def cmd_corpus(a):
    rng = random.Random(a.seed)
    pages = list(read_pages(a.pages))
    vocab = [w for p in pages[:200] for w in p["text"].split()][:200000]
    n = 0
    planted = []
    with open(a.out, "w", encoding="utf-8") as f:
        def put(doc_id, text):
            nonlocal n
            f.write(json.dumps({"id": doc_id, "url": "", "title": doc_id, "text": text}, ensure_ascii=False) + "\n")
            n += 1
        if a.mb:
            target = a.mb * 1_000_000
            i = 0
            while f.tell() < target:
                page = pages[i % len(pages)]["text"].split(" ")
                start = rng.randrange(max(1, len(page) - 50))
                span = page[start:start + rng.randint(50, 400)]
                put(f"d{i}", " ".join(substitute(span, 0.3, rng, vocab)))
                i += 1
        else:
            for p in pages:
                base = f"{p['id']}"
                put(base, p["text"])
                if a.planted:
                    for c in range(rng.choice([0, 0, 1, 1, 2, 3])):
                        text, edits = planted_copy(p["text"], rng, vocab)
                        put(f"{base}-copy{c}", text)
                        planted.append({"copy": f"{base}-copy{c}", "of": base, **edits})
    if a.planted:
        with open(a.out + ".planted.json", "w") as f:
            json.dump(planted, f, indent=1)
    print(json.dumps({"documents": n, "bytes": os.path.getsize(a.out), "planted_copies": len(planted)}))


def cpu_seconds():
    s, c = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return s.ru_utime + s.ru_stime + c.ru_utime + c.ru_stime


class UnionFind:
    def __init__(self):
        self.parent = {}

    def find(self, x):
        self.parent.setdefault(x, x)
        while self.parent[x] != x:
            self.parent[x] = self.parent[self.parent[x]]
            x = self.parent[x]
        return x

    def union(self, x, y):
        rx, ry = self.find(x), self.find(y)
        if rx != ry:
            self.parent[max(rx, ry)] = min(rx, ry)

    def clusters(self):
        groups = defaultdict(list)
        for x in self.parent:
            groups[self.find(x)].append(x)
        return [sorted(g) for g in groups.values() if len(g) > 1]


def cmd_datatrove(a):
    from datatrove.executor import LocalPipelineExecutor
    from datatrove.pipeline.dedup.minhash import (MinhashConfig, MinhashDedupBuckets, MinhashDedupCluster,
                                                  MinhashDedupFilter, MinhashDedupSignature)
    from datatrove.pipeline.readers import JsonlReader
    from datatrove.pipeline.writers.jsonl import JsonlWriter
    from datatrove.utils.typeshelper import Languages
    import logging
    from loguru import logger
    logger.remove()
    logging.disable(logging.INFO)
    config = MinhashConfig(n_grams=a.ngram, num_buckets=a.bands, hashes_per_bucket=a.rows)
    folder, name = os.path.dirname(os.path.abspath(a.corpus)), os.path.basename(a.corpus)
    w = os.path.abspath(a.work)

    def reader():
        return JsonlReader(folder, glob_pattern=name, text_key="text", id_key="id", doc_progress=False)

    def run(pipeline, tasks, step):
        LocalPipelineExecutor(pipeline=pipeline, tasks=tasks, workers=1, logging_dir=f"{w}/logs/{step}").run()

    cpu0, wall0 = cpu_seconds(), time.time()
    run([reader(), MinhashDedupSignature(output_folder=f"{w}/signatures", config=config, language=Languages.english)], 1, "s1")
    run([MinhashDedupBuckets(input_folder=f"{w}/signatures", output_folder=f"{w}/buckets", config=config)], config.num_buckets, "s2")
    run([MinhashDedupCluster(input_folder=f"{w}/buckets", output_folder=f"{w}/remove_ids", config=config, save_cluster_id=True)], 1, "s3")
    run([reader(), MinhashDedupFilter(input_folder=f"{w}/remove_ids", exclusion_writer=JsonlWriter(f"{w}/removed", compression=None)),
         JsonlWriter(f"{w}/output", compression=None)], 1, "s4")
    cpu, wall = cpu_seconds() - cpu0, time.time() - wall0
    groups = defaultdict(list)
    path = f"{w}/remove_ids/000000.clusters"
    if os.path.exists(path):
        with open(path, "rb") as f:
            data = f.read()
        for doc, cluster in struct.iter_unpack("<II", data):
            groups[cluster].append(doc)
    print(json.dumps({"tool": "datatrove", "cpu_s": cpu, "wall_s": wall,
                      "clusters": [sorted(g) for g in groups.values() if len(g) > 1]}))


def shingles_of(text, n):
    import xxhash
    from datatrove.utils.text import simplify_text
    words = simplify_text(text).split()
    return {xxhash.xxh3_64_intdigest(" ".join(words[i:i + n])) for i in range(len(words) - n + 1)}


def read_corpus(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def cmd_datasketch(a):
    from datasketch import MinHash, MinHashLSH
    docs = read_corpus(a.corpus)
    cpu0, wall0 = cpu_seconds(), time.time()
    k = a.bands * a.rows
    lsh = MinHashLSH(num_perm=k, params=(a.bands, a.rows))
    sigs = {}
    for i, d in enumerate(docs):
        s = shingles_of(d["text"], a.ngram)
        if not s:
            continue
        m = MinHash(num_perm=k, seed=1)
        m.update_batch([x.to_bytes(8, "little") for x in s])
        lsh.insert(i, m)
        sigs[i] = m
    uf = UnionFind()
    for i, m in sigs.items():
        for j in lsh.query(m):
            if j != i:
                uf.union(i, j)
    cpu, wall = cpu_seconds() - cpu0, time.time() - wall0
    print(json.dumps({"tool": "datasketch", "cpu_s": cpu, "wall_s": wall, "clusters": uf.clusters()}))


def cmd_ours(a):
    groups = defaultdict(set)
    with open(a.report) as f:
        for line in f:
            r = json.loads(line)
            groups[r["cluster"]] |= {r["cluster"], r["index"]}
    print(json.dumps({"tool": "dedup", "clusters": [sorted(g) for g in groups.values()]}))


def true_pairs(sets, t):
    """Every pair with Jaccard >= t, by prefix filtering: with tokens in ascending document frequency,
    two sets of similarity >= t share a token among the first |x| - ceil(t|x|) + 1 of each."""
    df = defaultdict(int)
    for s in sets:
        for x in s:
            df[x] += 1
    index = defaultdict(list)
    pairs = {}
    for i, s in enumerate(sets):
        if not s:
            continue
        order = sorted(s, key=lambda x: (df[x], x))
        prefix = order[:len(s) - math.ceil(t * len(s) - 1e-9) + 1]
        candidates = set()
        for x in prefix:
            candidates.update(index[x])
            index[x].append(i)
        for j in candidates:
            o = sets[j]
            if min(len(s), len(o)) < t * max(len(s), len(o)):
                continue
            jac = len(s & o) / len(s | o)
            if jac >= t:
                pairs[(j, i)] = jac
    return pairs


def cmd_evaluate(a):
    docs = read_corpus(a.corpus)
    sets = [shingles_of(d["text"], a.ngram) for d in docs]
    truth = true_pairs(sets, a.threshold)
    rows = []
    for path in a.results:
        with open(path) as f:
            r = json.load(f)
        predicted = set()
        for c in r["clusters"]:
            c = sorted(c)
            predicted |= {(c[x], c[y]) for x in range(len(c)) for y in range(x + 1, len(c))}
        good = sum(1 for (i, j) in predicted
                   if sets[i] and sets[j] and len(sets[i] & sets[j]) / len(sets[i] | sets[j]) >= a.threshold)
        found = sum(1 for p in truth if p in predicted)
        rows.append({"tool": r["tool"], "true_pairs": len(truth), "predicted_pairs": len(predicted),
                     "recall": found / len(truth) if truth else 1.0,
                     "precision": good / len(predicted) if predicted else 1.0,
                     "removed": sum(len(c) - 1 for c in r["clusters"]), "cpu_s": r.get("cpu_s")})
    print(json.dumps({"documents": len(docs), "threshold": a.threshold, "results": rows}))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("corpus")
    c.add_argument("pages", nargs="+")
    c.add_argument("--out", required=True)
    c.add_argument("--planted", action="store_true")
    c.add_argument("--mb", type=int, default=0)
    c.add_argument("--seed", type=int, default=49)
    for name in ("datatrove", "datasketch", "evaluate"):
        s = sub.add_parser(name)
        s.add_argument("corpus")
        s.add_argument("--ngram", type=int, default=5)
        s.add_argument("--bands", type=int, default=14)
        s.add_argument("--rows", type=int, default=8)
        if name == "datatrove":
            s.add_argument("--work", required=True)
        if name == "evaluate":
            s.add_argument("results", nargs="+")
            s.add_argument("--threshold", type=float, default=0.8)
    o = sub.add_parser("ours")
    o.add_argument("report")
    a = p.parse_args()
    {"corpus": cmd_corpus, "datatrove": cmd_datatrove, "datasketch": cmd_datasketch, "ours": cmd_ours,
     "evaluate": cmd_evaluate}[a.cmd](a)


if __name__ == "__main__":
    sys.exit(main())
