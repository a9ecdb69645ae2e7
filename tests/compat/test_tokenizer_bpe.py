#!/usr/bin/env python3
"""GPT-2 byte-level BPE: our `tokenize` against tiktoken's gpt2 encoding and HF's GPT2TokenizerFast.

Every line of vocab/botchan.txt, vocab/bert-sample_text.txt and of the `text` of every document in
wikipedia/*.wikiextractor.jsonl(.bz2) (split at \\n), hand-picked hard cases (emoji, ZWJ sequences,
flags, CJK, every White_Space character and its near misses, contractions in all cases,
<|endoftext|> inside text, ...) and seeded random lines must give the same ids as
  - tiktoken, built from the shared gpt2 files, encode(x, allowed_special="all")
  - transformers.GPT2TokenizerFast(vocab_file=encoder.json, merges_file=vocab.bpe)
through encoder.json + vocab.bpe and through the tokenizer.json HF saves (merges as pairs, and
rewritten as "a b" strings); `tokenize --decode` must give every line back exactly.

Texts with \\n inside cannot pass through the line-based tool; tests/tokenizer/bpe_test.cpp checks
those through the C++ API.
"""
import bz2
import glob
import json
import os
import random
import sys
import unicodedata

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compat_util  # noqa: E402

compat_util.require_venv_modules("tiktoken", "transformers", "tokenizers")

import tiktoken  # noqa: E402
import tiktoken.load  # noqa: E402

GPT2_PATTERN = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""

# Characters around which the pre-tokenizer's classes are easy to get wrong: every White_Space
# code point, and code points that look like spaces or are \s in Python but not White_Space.
WHITESPACE = ["\t", "\x0b", "\x0c", "\r", " ", "\x85", "\xa0", "\u1680"] + [chr(c) for c in range(0x2000, 0x200B)] + \
    ["\u2028", "\u2029", "\u202f", "\u205f", "\u3000"]
NEAR_SPACE = ["\x1c", "\x1d", "\x1e", "\x1f", "\u180e", "\u200b", "\u200c", "\u200d", "\u2060", "\ufeff", "\x00", "\x7f"]

HARD_CASES = [
    "", " ", "  ", "   word", "word   ", "   ", "\t", "\t\tword", "a\tb", " \t x", "a  b", "a   b", "a \t b",
    " " * 100 + "x", "x" + " " * 100, "\t" * 50 + " " + "x", "a" + " \u3000 " * 20 + "b",
    "don't", "Don't", "DON'T", "you'll", "YOU'LL", "You'Ll", "I'm", "I'M", "we've", "WE'VE", "they're", "THEY'RE",
    "he'd", "HE'D", "it's", "IT'S", "'S", "'s", "'sam", "''s", "'''", "' s", "rock'n'roll", "o'clock", "'ll've're",
    "'", "x'", "'x", "quote'", " 'tis", "`don`t`", "don\u2019t",
    "<|endoftext|>", "a<|endoftext|>b", " <|endoftext|> ", "<|endoftext|><|endoftext|>", "<|endoftext|",
    "<|endoftext||>", "<|endofText|>", "x <|endoftext|>", "<|endoftext|>x", "<|startoftext|>",
    "hello world", " hello", "hello ", " hello ", "Hello, World!", "Mr. O'Neil's 3rd car: $5,000.99 (approx.)",
    "123", " 123", "1 2 3", "12345678901234567890", "3.14159", "1e10", "0x1F", "v2.0.1", "a1b2c3", "１２３", "٣٤٥",
    "²³", "½", "Ⅻ", "①②", "x²", "H₂O", "৩", "໓", "𝟙𝟚",
    "🙂", "🙂🙂🙂", " 🙂", "a🙂b", "👨‍👩‍👧‍👦", "👍🏽", "🇯🇵🇫🇷", "🏳️‍🌈", "1️⃣", "❤️", "🤷‍♀️", "🧑🏾‍🚀",
    "日本語のテキスト", "東京は日本の首都です。", "漢字かなカナ", "ｶﾀｶﾅ", "한국어 텍스트", "中文文本，标点。",
    "Ελληνικά κείμενα", "Καλημέρα!", "Русский текст", "Български", "עברית", "العربية ٣", "हिन्दी", "ไทย",
    "café", "cafe\u0301", "e\u0301\u0301", " \u0301", "\u0301a", "n\u0303o", "ǅ", "ʰʲ", "ß", "İstanbul", "ﬁ",
    "\u00a0", "a\u00a0b", "a \u00a0b", "\u00a0\u00a0x", "x\u00a0", "\u3000", "a\u3000b", "\u3000\u3000x",
    "\r\x0b\x0c", "a\rb", "trailing spaces   ", "\t\t", "x \t", "\u2028x", "x\u2029",
    "#hashtag @user https://example.com/path?q=1&b=2", "C++ std::vector<int> v{1,2};", "a->b => c",
    "—–-", "…", "«quotes»", "„Anführungszeichen“", "¡Hola!", "¿Qué?", "~!@#$%^&*()_+", "\\n", "\ufffd",
    "\U0001F600" * 30, "x" * 500, "ab" * 300, "\u0000", "tab\there", "🙂 ok",
] + [f"a{c}b" for c in WHITESPACE + NEAR_SPACE] + [f"a {c}b" for c in WHITESPACE + NEAR_SPACE] + \
    [f"a{c} b" for c in WHITESPACE + NEAR_SPACE] + [f"{c}{c}a" for c in WHITESPACE + NEAR_SPACE] + \
    [f" {c}" for c in WHITESPACE + NEAR_SPACE] + [f"{c}" for c in WHITESPACE + NEAR_SPACE]


def random_lines(count, seed=1234):
    """Lines mixing the hard characters with random assigned code points (no \\n).

    Only code points assigned in Unicode 14 (Python 3.11's unicodedata): the references disagree
    among themselves on later ones (tiktoken's Rust regex knows Unicode 16, HF's Oniguruma treats
    Unicode 15's CJK Extension H as unassigned, ICU 72 is Unicode 15), so a letter there is a letter
    to one and punctuation to another (seen on U+13CE4, U+320E6 before "'ll")."""
    rng = random.Random(seed)
    pool = list("aZ09 '.,!-_\t") + WHITESPACE + NEAR_SPACE + list("日本語ΕλληνικάПриветéüß٣١２①Ⅻ🙂👨‍👩🇯🇵\u0301\u200d") + \
        ["'s", "'ll", "'re", "'ve", "'m", "'d", "'t", "<|endoftext|>", "  ", "   "]
    lines = []
    for _ in range(count):
        parts = []
        for _ in range(rng.randint(0, 40)):
            r = rng.random()
            if r < 0.7:
                parts.append(rng.choice(pool))
            else:
                while True:
                    c = chr(rng.choice([rng.randint(0x20, 0x7ff), rng.randint(0x800, 0xffff),
                                        rng.randint(0x10000, 0x3ffff)]))
                    # Assigned in Python's Unicode (14.0 in 3.11) and not a surrogate or \n.
                    if unicodedata.category(c) not in ("Cn", "Cs") and c != "\n":
                        break
                parts.append(c)
        lines.append("".join(parts))
    return lines


def text_lines(path):
    with open(path, encoding="utf-8") as f:
        return f.read().split("\n")


def wiki_lines(path):
    opener = bz2.open if path.endswith(".bz2") else open
    lines = []
    with opener(path, "rt", encoding="utf-8") as f:
        for record in f:
            if record.strip():
                lines.extend(json.loads(record).get("text", "").split("\n"))
    return lines


def as_tool_line(line):
    # The tool reads one line per \n and drops one trailing \r: a line cannot end in \r.
    return line.rstrip("\r")


def run_tool_ids(tokenizer_path, lines, tmp, name):
    src = os.path.join(tmp, name + ".txt")
    out = os.path.join(tmp, name + ".ids")
    with open(src, "w", encoding="utf-8", newline="") as f:
        f.write("".join(line + "\n" for line in lines))
    compat_util.run(compat_util.tool("tokenize"), "--tokenizer", tokenizer_path, "--ids", "-i", src, "-o", out)
    with open(out, encoding="utf-8") as f:
        got = [[int(t) for t in row.split()] for row in f.read().split("\n")[:-1]]
    if len(got) != len(lines):
        raise SystemExit(f"{name}: {len(got)} output lines for {len(lines)} input lines")
    return got, out


def compare(label, lines, got, want, limit=5):
    bad = [i for i in range(len(lines)) if got[i] != want[i]]
    for i in bad[:limit]:
        print(f"MISMATCH {label} line {i}: {lines[i]!r}\n  ours: {got[i]}\n  want: {want[i]}")
    return len(bad)


def main():
    data = compat_util.shared_data()
    if not data:
        compat_util.skip("shared data not found")
    vocab_dir = os.path.join(data, "vocab")
    encoder = os.path.join(vocab_dir, "gpt2-encoder.json")
    merges = os.path.join(vocab_dir, "gpt2-vocab.bpe")
    if not (os.path.exists(encoder) and os.path.exists(merges)):
        compat_util.skip("gpt2-encoder.json / gpt2-vocab.bpe not in shared data")

    tiktoken.load.read_file = lambda p: open(p, "rb").read()  # local files, no blobfile
    ranks = tiktoken.load.data_gym_to_mergeable_bpe_ranks(merges, encoder)
    enc = tiktoken.Encoding(name="gpt2", pat_str=GPT2_PATTERN, mergeable_ranks=ranks,
                            special_tokens={"<|endoftext|>": 50256})
    from transformers import GPT2TokenizerFast
    hf = GPT2TokenizerFast(vocab_file=encoder, merges_file=merges)

    sources = {"hard cases": HARD_CASES, "random": random_lines(20000)}
    for name in ("botchan.txt", "bert-sample_text.txt"):
        sources[name] = text_lines(os.path.join(vocab_dir, name))
    for path in sorted(glob.glob(os.path.join(data, "wikipedia", "*.wikiextractor.jsonl*"))):
        sources[os.path.basename(path)] = wiki_lines(path)

    failures = 0
    with compat_util.tempdir() as tmp:
        hf_json = os.path.join(tmp, "hf", "tokenizer.json")
        os.makedirs(os.path.dirname(hf_json))
        hf.backend_tokenizer.save(hf_json)
        with open(hf_json, encoding="utf-8") as f:
            j = json.load(f)
        j["model"]["merges"] = [m if isinstance(m, str) else " ".join(m) for m in j["model"]["merges"]]
        hf_json_strings = os.path.join(tmp, "hf-strings", "tokenizer.json")
        os.makedirs(os.path.dirname(hf_json_strings))
        with open(hf_json_strings, "w", encoding="utf-8") as f:
            json.dump(j, f)

        for label, raw in sources.items():
            lines = [as_tool_line(line) for line in raw]
            want_tt = enc.encode_batch(lines, allowed_special="all")
            want_hf = [e.ids for e in hf.backend_tokenizer.encode_batch(lines, add_special_tokens=False)]
            if label == "hard cases":  # the transformers API itself, not only its backend
                assert want_hf == [hf.encode(line, add_special_tokens=False) for line in lines]
            got, ids_file = run_tool_ids(encoder, lines, tmp, "bpe")
            n_tt = compare(f"{label} vs tiktoken", lines, got, want_tt)
            n_hf = compare(f"{label} vs HF", lines, got, want_hf)
            got_json, _ = run_tool_ids(hf_json, lines, tmp, "hfjson")
            n_json = compare(f"{label} tokenizer.json (pairs) vs ours", lines, got_json, got)
            n_json_s = 0
            if label in ("hard cases", "random", "botchan.txt"):
                got_json_s, _ = run_tool_ids(hf_json_strings, lines, tmp, "hfjson_s")
                n_json_s = compare(f"{label} tokenizer.json (strings) vs ours", lines, got_json_s, got)
            decoded_path = os.path.join(tmp, "decoded.txt")
            compat_util.run(compat_util.tool("tokenize"), "--tokenizer", encoder, "--decode", "-i", ids_file,
                            "-o", decoded_path)
            with open(decoded_path, encoding="utf-8", newline="") as f:
                decoded = f.read().split("\n")[:-1]
            n_dec = sum(1 for a, b in zip(decoded, lines) if a != b) + abs(len(decoded) - len(lines))
            for i in [i for i in range(min(len(decoded), len(lines))) if decoded[i] != lines[i]][:5]:
                print(f"MISMATCH {label} decode line {i}: {lines[i]!r} -> {decoded[i]!r}")
            tokens = sum(len(x) for x in got)
            print(f"{label}: {len(lines)} lines, {tokens} tokens; mismatches: tiktoken {n_tt}, HF {n_hf}, "
                  f"tokenizer.json {n_json + n_json_s}, decode {n_dec}")
            failures += n_tt + n_hf + n_json + n_json_s + n_dec
    if failures:
        raise SystemExit(f"FAIL: {failures} mismatches")
    print("OK")


if __name__ == "__main__":
    main()
