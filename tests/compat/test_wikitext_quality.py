"""Our wikitext cleaner against wikiextractor 3.0.7 on the main enwiki sample: the same articles,
word recall of their text in ours (mean >= 0.97, 5th percentile >= 0.90), and less leaked markup
than theirs in every column (none where they leak none). Skips (77) without the shared data."""
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compat_util as cu  # noqa: E402

SAMPLE = "wikipedia/enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened"


def main():
    data = cu.shared_data()
    if not data:
        cu.skip("no shared data")
    dump = os.path.join(data, SAMPLE + ".bz2")
    reference = os.path.join(data, SAMPLE + ".wikiextractor.jsonl")
    if not (os.path.exists(dump) and os.path.exists(reference)):
        cu.skip(f"{SAMPLE} not in shared data")
    src = os.environ["PRETRAIN_SOURCE_DIR"]
    sys.path.insert(0, os.path.join(src, "scripts", "bench"))
    import wikiprep_quality as wq

    with cu.tempdir() as tmp:
        pages = os.path.join(tmp, "pages.jsonl")
        ours = os.path.join(tmp, "ours.jsonl")
        with open(pages, "w") as out:
            subprocess.run([sys.executable, os.path.join(src, "scripts/bench/extract_wikitext.py"), dump],
                           stdout=out, check=True)
        with open(pages) as inp, open(ours, "w") as out:
            subprocess.run([cu.tool("wikitext_clean")], stdin=inp, stdout=out, check=True)
        r = wq.compare(ours, reference, dump=dump)
    wq.print_table("enwiki main sample", r)

    failures = []
    if r["only_ours"] or r["only_theirs"] or r["both"] != 106:
        failures.append(f"article sets differ: both {r['both']}, only ours {r['only_ours']}, "
                        f"only theirs {r['only_theirs']}")
    if r["recall_mean"] < 0.97:
        failures.append(f"recall mean {r['recall_mean']:.4f} < 0.97")
    if r["recall_p5"] < 0.90:
        failures.append(f"recall p5 {r['recall_p5']:.4f} < 0.90")
    for pattern in wq.LEAKS:
        o, t = r["leaks_ours"][pattern], r["leaks_theirs"][pattern]
        if not (o < t or o == t == 0):
            failures.append(f"leaks {pattern!r}: ours {o}, theirs {t}")
    if failures:
        print("FAIL:\n  " + "\n  ".join(failures))
        sys.exit(1)
    print("OK")


if __name__ == "__main__":
    main()
