#!/usr/bin/env python3
"""Builds a benchmark dump from the real shared pages, for scripts/bench/wikiprep.sh and scale.sh.

  dump_pages.py DATA OUT MB [--pages mix|en] [--parts]

DATA is the shared wikipedia folder. The pages of the chosen samples are repeated, in turn, until
the body holds >= MB MB of XML, under the enwiki sample's <siteinfo>:
  mix: enwiki main, jawiki and elwikivoyage (three scripts and markups; wikiextractor is
       relatively faster on the Japanese part);
  en:  the English samples only (enwiki main and enwiki-10k), the pages issue 18's wikiprep goal
       was stated on, and what an enwiki dump holds.
Without --parts OUT is one XML file, closed with </mediawiki>. With --parts OUT is a folder that
receives head.xml, body.xml and tail.xml (scale.sh compresses the body once and repeats it).
"""
import argparse
import bz2

SAMPLES = {
    "mix": ["enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2",
            "wp2txt-jawiki-2022-testdata_ja.xml.bz2", "elwikivoyage-sample-pages-articles.xml.bz2"],
    "en": ["enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2", "wikidump-enwiki-10k.xml.bz2"],
}


def split(path):
    """(everything before the first <page>, the pages) of a dump."""
    x = bz2.decompress(open(path, "rb").read())
    first, last = x.index(b"  <page>"), x.rindex(b"</page>") + len(b"</page>\n")
    return x[:first], x[first:last]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("data")
    ap.add_argument("out")
    ap.add_argument("mb", type=float)
    ap.add_argument("--pages", choices=sorted(SAMPLES), default="mix")
    ap.add_argument("--parts", action="store_true")
    a = ap.parse_args()
    names = SAMPLES[a.pages]
    head = split(f"{a.data}/{names[0]}")[0]  # the enwiki sample's <mediawiki> and <siteinfo>
    pages = [split(f"{a.data}/{n}")[1] for n in names]
    tail = b"</mediawiki>\n"
    with open(f"{a.out}/body.xml" if a.parts else a.out, "wb") as f:
        if not a.parts:
            f.write(head)
        size, i = 0, 0
        while size < a.mb * 1_000_000:
            f.write(pages[i % len(pages)])
            size += len(pages[i % len(pages)])
            i += 1
        if not a.parts:
            f.write(tail)
    if a.parts:
        open(f"{a.out}/head.xml", "wb").write(head)
        open(f"{a.out}/tail.xml", "wb").write(tail)


if __name__ == "__main__":
    main()
