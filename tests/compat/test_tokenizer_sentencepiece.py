#!/usr/bin/env python3
"""Our SentencePiece tokenizer against Debian's spm_encode / spm_decode (libsentencepiece itself),
for both test models in shared data, over every line of botchan.txt, bert-sample_text.txt and the
text of every wikiextractor document in wikipedia/ (en, el, ja …): `tokenize --ids` must equal
`spm_encode --output_format=id`, `--tokens` equal `--output_format=piece`, and `tokenize --decode`
equal `spm_decode` on the same ids. Any mismatch fails, with the first few shown."""
import bz2
import glob
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compat_util as cu  # noqa: E402

SPM_ENCODE = "/usr/bin/spm_encode"
SPM_DECODE = "/usr/bin/spm_decode"


def corpus_lines(data):
    """Lines as `tokenize` reads them: split at \\n, one trailing \\r dropped."""
    lines = []
    for name in ("vocab/botchan.txt", "vocab/bert-sample_text.txt"):
        with open(os.path.join(data, name), "rb") as f:
            text = f.read().decode("utf-8")
        lines += [l[:-1] if l.endswith("\r") else l for l in text.split("\n")[:-1 if text.endswith("\n") else None]]
    for path in sorted(glob.glob(os.path.join(data, "wikipedia", "*.wikiextractor.jsonl*"))):
        opener = bz2.open if path.endswith(".bz2") else open
        with opener(path, "rt", encoding="utf-8") as f:
            for record in f:
                if record.strip():
                    lines += json.loads(record)["text"].split("\n")
    # A line with \r inside (not at its end) would be split differently by the two readers.
    return [l.replace("\r", " ") for l in lines]


def compare(name, ours, theirs):
    a, b = ours.split("\n"), theirs.split("\n")
    bad = [i for i in range(max(len(a), len(b))) if (a[i] if i < len(a) else None) != (b[i] if i < len(b) else None)]
    for i in bad[:5]:
        print(f"  {name} line {i + 1}:\n    ours:   {a[i] if i < len(a) else '<missing>'}\n"
              f"    theirs: {b[i] if i < len(b) else '<missing>'}")
    return len(bad)


def main():
    data = cu.shared_data()
    if not data:
        cu.skip("shared data not found")
    if not os.path.exists(SPM_ENCODE) or not os.path.exists(SPM_DECODE):
        cu.skip("spm_encode/spm_decode not installed (Debian sentencepiece)")
    tokenize = cu.tool("tokenize")
    lines = corpus_lines(data)
    failures = 0
    with cu.tempdir() as tmp:
        text = os.path.join(tmp, "lines.txt")
        with open(text, "w", encoding="utf-8", newline="\n") as f:
            f.write("".join(l + "\n" for l in lines))
        for model in ("spm-test_model.model", "spm-test_ja_model.model"):
            path = os.path.join(data, "vocab", model)
            ids = cu.run(tokenize, "--tokenizer", path, "--ids", "-i", text, "--quiet").stdout
            ref_ids = cu.run(SPM_ENCODE, "--model", path, "--output_format=id", "--input", text).stdout
            pieces = cu.run(tokenize, "--tokenizer", path, "--tokens", "-i", text, "--quiet").stdout
            ref_pieces = cu.run(SPM_ENCODE, "--model", path, "--output_format=piece", "--input", text).stdout
            id_file = os.path.join(tmp, "ids.txt")
            with open(id_file, "w") as f:
                f.write(ref_ids)
            decoded = cu.run(tokenize, "--tokenizer", path, "--decode", "-i", id_file, "--quiet").stdout
            ref_decoded = cu.run(SPM_DECODE, "--model", path, "--input_format=id", "--input", id_file).stdout
            bad = {"ids": compare(f"{model} ids", ids, ref_ids),
                   "pieces": compare(f"{model} pieces", pieces, ref_pieces),
                   "decode": compare(f"{model} decode", decoded, ref_decoded)}
            n_tokens = sum(len(l.split()) for l in ref_ids.split("\n"))
            print(f"{model}: {len(lines)} lines, {n_tokens} tokens; mismatched lines: "
                  + ", ".join(f"{k} {v}" for k, v in bad.items()))
            failures += sum(bad.values())
    if failures:
        sys.exit(f"FAIL: {failures} mismatched lines")
    print("OK")


if __name__ == "__main__":
    main()
