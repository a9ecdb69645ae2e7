#!/usr/bin/env python3
"""Raw wikitext out of a MediaWiki XML dump, as JSON lines for tests/compat/wikitext_clean.

    extract_wikitext.py DUMP.xml[.bz2] [--all] > pages.jsonl

One line per page: {"id","title","ns","text","url"}, the text of the page's last revision as the
XML parser gives it (entities decoded once). By default only namespace-0 pages that are not
redirects, the pages wikiprep turns into documents. `url` is made like wikiextractor's: the
directory of <siteinfo><base> plus "?curid=<id>". A dump cut short (no </mediawiki>) is read up to
its last whole page.
"""
import argparse
import bz2
import json
import sys
import xml.etree.ElementTree as ET


def local(tag):
    return tag.rsplit("}", 1)[-1]


def open_dump(path):
    with open(path, "rb") as f:
        magic = f.read(3)
    return bz2.open(path, "rb") if magic == b"BZh" else open(path, "rb")


def pages(path):
    """Yields (page dict, url base) for every <page>, in order."""
    base = ""
    stream = open_dump(path)
    context = ET.iterparse(stream, events=("start", "end"))
    root = None
    try:
        for event, elem in context:
            if root is None:
                root = elem
            if event != "end":
                continue
            tag = local(elem.tag)
            if tag == "base" and not base:
                base = (elem.text or "").rsplit("/", 1)[0]
            elif tag == "page":
                page = {"id": "", "title": "", "ns": "0", "redirect": False, "text": ""}
                for child in elem:
                    name = local(child.tag)
                    if name in ("id", "title", "ns"):
                        page[name] = child.text or ""
                    elif name == "redirect":
                        page["redirect"] = True
                    elif name == "revision":  # the last revision wins
                        for r in child:
                            if local(r.tag) == "text":
                                page["text"] = r.text or ""
                yield page, base
                elem.clear()
                root.clear()  # drop finished pages from the tree: constant memory
    except ET.ParseError as e:
        # A truncated dump (the jawiki sample lacks </mediawiki>): stop after the last whole page.
        print(f"extract_wikitext: {path}: stopped at XML error: {e}", file=sys.stderr)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dump")
    ap.add_argument("--all", action="store_true", help="every page, not only ns-0 articles")
    args = ap.parse_args()
    out = sys.stdout
    n = 0
    for page, base in pages(args.dump):
        if not args.all and (page["ns"] != "0" or page["redirect"]):
            continue
        record = {"id": page["id"], "title": page["title"], "ns": int(page["ns"] or 0),
                  "text": page["text"], "url": f"{base}?curid={page['id']}" if base else ""}
        out.write(json.dumps(record, ensure_ascii=False) + "\n")
        n += 1
    print(f"extract_wikitext: {n} pages", file=sys.stderr)


if __name__ == "__main__":
    main()
