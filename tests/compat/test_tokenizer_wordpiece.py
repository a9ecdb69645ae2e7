#!/usr/bin/env python3
"""WordPiece (BERT) against HF's BertTokenizerFast and Google's tokenizer, token for token.

Every line of every text in the shared data (botchan, BERT's sample text, the `text` of every
document of every wikipedia/*.wikiextractor.jsonl(.bz2)), for the uncased, cased and Chinese
vocabularies, through our `tokenize --ids` and through transformers.BertTokenizerFast(line,
add_special_tokens=False); then every code point in a short line; special tokens written in the
text; decode; HF's own tokenizer.json; and the golden ids of Google's (NVIDIA DLE's) Python
tokenizer. Any mismatch fails the test, after printing the first ones with their context.
"""
import bz2
import glob
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compat_util  # noqa: E402

compat_util.require_venv_modules("tokenizers", "transformers")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "true")
import transformers  # noqa: E402

transformers.logging.set_verbosity_error()

DATA = compat_util.shared_data()
if not DATA or not os.path.exists(os.path.join(DATA, "vocab", "bert-base-uncased-vocab.txt")):
    compat_util.skip("shared data (vocab/bert-base-*-vocab.txt) not found")
TOKENIZE = compat_util.tool("tokenize")
VOCAB = {v: os.path.join(DATA, "vocab", f"bert-base-{v}-vocab.txt") for v in ("uncased", "cased", "chinese")}
failures = []


def text_lines(path):
    """Lines as `tokenize` reads them: split at \\n, one trailing \\r dropped, bad bytes → U+FFFD."""
    data = open(path, "rb").read()
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    return [(l[:-1] if l.endswith(b"\r") else l).decode("utf-8", "replace") for l in lines]


def wiki_lines():
    out = {}
    for path in sorted(glob.glob(os.path.join(DATA, "wikipedia", "*.wikiextractor.jsonl*"))):
        opener = bz2.open if path.endswith(".bz2") else open
        lines = []
        with opener(path, "rt", encoding="utf-8") as f:
            for record in f:
                if record.strip():
                    lines.extend(json.loads(record)["text"].split("\n"))
        out[os.path.basename(path)] = lines
    return out


def ours(tokenizer, lines, *flags):
    with compat_util.tempdir() as d:
        src, dst = os.path.join(d, "in.txt"), os.path.join(d, "out.txt")
        with open(src, "w", encoding="utf-8", newline="\n") as f:
            f.write("".join(line + "\n" for line in lines))
        compat_util.run(TOKENIZE, "--tokenizer", tokenizer, "--ids", "-i", src, "-o", dst, *flags)
        with open(dst, encoding="utf-8") as f:
            result = [[int(x) for x in line.split()] for line in f.read().split("\n")[:-1]]
    if len(result) != len(lines):
        raise SystemExit(f"tokenize wrote {len(result)} lines for {len(lines)}")
    return result


def compare(name, lines, got, want, hf=None, limit=5):
    tokens = sum(len(w) for w in want)
    bad = [i for i in range(len(lines)) if got[i] != want[i]]
    print(f"{name}: {len(lines)} lines, {tokens} tokens, {len(bad)} lines differ")
    for i in bad[:limit]:
        k = next((k for k in range(min(len(got[i]), len(want[i]))) if got[i][k] != want[i][k]),
                 min(len(got[i]), len(want[i])))
        show = (lambda ids: hf.convert_ids_to_tokens(ids)) if hf else (lambda ids: ids)
        print(f"  line {i + 1}: {lines[i][:200]!r}\n    ours {show(got[i][max(0, k - 3):k + 5])}\n"
              f"    want {show(want[i][max(0, k - 3):k + 5])}  (first difference at token {k})")
    if bad:
        failures.append(name)


def hf_ids(tok, lines):
    return tok(lines, add_special_tokens=False)["input_ids"]


corpora = {"botchan.txt": text_lines(os.path.join(DATA, "vocab", "botchan.txt")),
           "bert-sample_text.txt": text_lines(os.path.join(DATA, "vocab", "bert-sample_text.txt"))}
corpora.update(wiki_lines())
all_lines = [line for lines in corpora.values() for line in lines]

# Code points (but \n and \r, which end lines), alone, inside a word and beside one: all of
# planes 0-3 and 14, where characters are assigned, and a sample of the empty and private planes.
code_points = [f"x{chr(c)}y {chr(c)} a{chr(c)}{chr(c)}" for c in range(0x110000)
               if c not in (0x0A, 0x0D) and not 0xD800 <= c <= 0xDFFF
               and (c < 0x40000 or 0xE0000 <= c < 0xF0000 or c % 97 == 0)]
for name, lines in corpora.items():
    print(f"{name}: {len(lines)} lines")

special = ["[MASK]", "[mask]", "x[SEP]y", "a [CLS]b", "[UNK]", "[PAD][PAD]", "[[MASK]]", "[ MASK]", "[MASK",
           "Hello [MASK] world!", "İstanbul ΟΔΟΣ", "naïve Ångström ﬁ", "x\x00y\ufffdz\u200bq", "", "   ",
           "a" * 100, "a" * 101, "é" * 101, "##", "##a", "[CLS][SEP]", "don't stop, 'em! ok ?"]

settings = [("uncased", True, []), ("cased", False, []), ("chinese", True, []), ("chinese", False, ["--no-lowercase"])]
for vocab, lower, flags in settings:
    hf = transformers.BertTokenizerFast(vocab_file=VOCAB[vocab], do_lower_case=lower)
    label = f"{vocab} (do_lower_case={lower}{', ours ' + ' '.join(flags) if flags else ', our auto rule'})"
    print(f"== {label}")
    compare(f"{label} all texts", all_lines, ours(VOCAB[vocab], all_lines, *flags), hf_ids(hf, all_lines), hf)
    if vocab != "chinese":  # the character classes do not depend on the vocabulary
        compare(f"{label} code points", code_points, ours(VOCAB[vocab], code_points, *flags),
                hf_ids(hf, code_points), hf)
    compare(f"{label} special tokens", special, ours(VOCAB[vocab], special, *flags), hf_ids(hf, special), hf)

# Our auto rule must pick what the test assumed above.
for vocab, lower in (("uncased", True), ("cased", False), ("chinese", True)):
    plain = ours(VOCAB[vocab], ["Hello"])[0]
    forced = ours(VOCAB[vocab], ["Hello"], "--lowercase" if lower else "--no-lowercase")[0]
    print(f"auto rule: {vocab} lowercases: {lower} ({'ok' if plain == forced else 'NO'})")
    if plain != forced:
        failures.append(f"auto lowercase rule for {vocab}")

# decode: HF's WordPiece decoder + clean_up_tokenization_spaces.
hf = transformers.BertTokenizerFast(vocab_file=VOCAB["uncased"], do_lower_case=True)
sample = [line for line in all_lines if line.strip()][:3000] + special
ids = hf_ids(hf, sample)
with compat_util.tempdir() as d:
    src = os.path.join(d, "ids.txt")
    with open(src, "w") as f:
        f.write("".join(" ".join(map(str, i)) + "\n" for i in ids))
    out = compat_util.run(TOKENIZE, "--tokenizer", VOCAB["uncased"], "--decode", "-i", src).stdout.split("\n")[:-1]
want = [hf.decode(i) for i in ids]
bad = [k for k in range(len(sample)) if out[k] != want[k]]
print(f"decode: {len(sample)} lines, {len(bad)} differ")
for k in bad[:5]:
    print(f"  ours {out[k][:150]!r}\n  want {want[k][:150]!r}")
if bad:
    failures.append("decode")

# HF's own tokenizer.json (model, normalizer flags, added tokens) gives the same ids.
for vocab, lower in (("uncased", True), ("cased", False)):
    hf = transformers.BertTokenizerFast(vocab_file=VOCAB[vocab], do_lower_case=lower)
    with compat_util.tempdir() as d:
        path = os.path.join(d, "tokenizer.json")
        hf.backend_tokenizer.save(path)
        lines = all_lines[:20000] + special
        compare(f"{vocab} tokenizer.json", lines, ours(path, lines), hf_ids(hf, lines), hf)

# Google's tokenizer (NVIDIA DLE tokenization.py): the golden ids. Botchan is read with universal
# newlines there; it has CRLF endings, which `tokenize` drops the same way.
for vocab in ("uncased", "cased"):
    for text in ("botchan", "bert-sample_text"):
        golden = os.path.join(DATA, "golden", f"wordpiece-{vocab}-{text}.ids.txt")
        if not os.path.exists(golden):
            continue
        want = [[int(x) for x in line.split()] for line in open(golden).read().split("\n")[:-1]]
        lines = text_lines(os.path.join(DATA, "vocab", f"{text}.txt"))
        for flags in ([], ["--python-compat"]):
            compare(f"golden {vocab} {text} {' '.join(flags)}", lines, ours(VOCAB[vocab], lines, *flags), want)

if failures:
    raise SystemExit(f"FAILED: {failures}")
print("OK")
