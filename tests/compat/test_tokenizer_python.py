"""The Python tokenizer bindings (pretrain.tokenizer, <build>/python/) against the `tokenize` command:
the same ids from encode and encode_batch (with and without special tokens), the same tokens and
decoded text, for a WordPiece vocabulary and a SentencePiece model trained here from our sample, a
tiny byte-level BPE of our own and, when the shared data is there, bert-base-uncased, GPT-2 and
SentencePiece's test model. Also: encode_batch from two Python threads at once (the GIL released),
pathlib paths, errors (a missing or malformed vocabulary raises naming the file, an id outside the
vocabulary ValueError), and pretrain.loader being the pretrain_loader module. No pip: the build tree.
"""
import os
import pathlib
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compat_util as cu  # noqa: E402

sys.path.insert(0, os.path.join(cu.build_dir(), "python"))
try:
    import pretrain  # noqa: E402
    import pretrain_loader  # noqa: E402
    from pretrain.tokenizer import Tokenizer  # noqa: E402
except ImportError as e:
    cu.skip(f"the Python modules are not built in {cu.build_dir()}/python: {e}")

# One line each (the command reads lines): special tokens written in the text, accents, CJK,
# right-to-left, emoji, digits, runs of spaces, an empty line.
LINES = [
    "The bay opens to the sea; tides follow a pattern.",
    "Hello [MASK] world<|endoftext|>and   spaces  here",
    "Café naïve résumé — “quotes” and 12,345.67 numbers",
    "東京は日本の首都です。 עברית מימין לשמאל",
    "emoji 🙂 and tabs\tinside",
    "",
]
failures = []


def fail(message):
    print(f"FAIL: {message}")
    failures.append(message)


def check(name, path, lines=LINES):
    tok = Tokenizer(path)
    ids = cu.tokenize_cli(path, lines)
    special = cu.tokenize_cli(path, lines, "--add-special-tokens")
    tokens = cu.tokenize_cli(path, lines, "--tokens")
    decoded = cu.tokenize_cli(path, [" ".join(map(str, i)) for i in ids], "--decode")
    for i, line in enumerate(lines):
        if tok.encode(line) != ids[i]:
            fail(f"{name}: encode({line!r}) = {tok.encode(line)}, tokenize says {ids[i]}")
        if tok.encode(line, add_special_tokens=True) != special[i]:
            fail(f"{name}: encode({line!r}, add_special_tokens=True) differs from --add-special-tokens")
        if tok.tokenize(line) != tokens[i]:
            fail(f"{name}: tokenize({line!r}) = {tok.tokenize(line)}, tokenize --tokens says {tokens[i]}")
        if tok.decode(ids[i]) != decoded[i]:
            fail(f"{name}: decode({ids[i]}) = {tok.decode(ids[i])!r}, tokenize --decode says {decoded[i]!r}")
    if tok.encode_batch(lines) != ids:
        fail(f"{name}: encode_batch differs from the command's ids")
    if tok.encode_batch(lines, add_special_tokens=True) != special:
        fail(f"{name}: encode_batch(add_special_tokens=True) differs from --add-special-tokens")
    if tok.encode(lines[0].encode()) != ids[0]:
        fail(f"{name}: UTF-8 bytes encode differently from str")
    print(f"{name}: {tok!r}: {sum(map(len, ids))} ids over {len(lines)} lines as the command's")
    return tok


def check_threads(tok):
    """encode_batch from two threads at once, many texts each: the same ids as one at a time."""
    texts = [f"{LINES[i % 5]} {i}" for i in range(4000)]
    want = [tok.encode(t) for t in texts]
    results = [None, None]

    def work(k):
        results[k] = tok.encode_batch(texts)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if results[0] != want or results[1] != want:
        fail("encode_batch from two threads differs from encode one text at a time")


def check_errors(tmp, tok):
    missing = os.path.join(tmp, "no-such-vocab.txt")
    try:
        Tokenizer(missing)
        fail("a missing vocabulary loaded")
    except RuntimeError as e:
        if missing not in str(e):
            fail(f"a missing vocabulary is not named: {e}")
    bad = os.path.join(tmp, "bad-encoder.json")
    with open(bad, "w") as f:
        f.write('{"a": 0, "b": ')
    with open(os.path.join(tmp, "bad-vocab.bpe"), "w") as f:
        f.write("#version: 0.2\n")
    try:
        Tokenizer(bad)
        fail("a malformed encoder.json loaded")
    except RuntimeError as e:
        if "bad-encoder.json" not in str(e):
            fail(f"a malformed encoder.json is not named: {e}")
    try:
        tok.decode([0, tok.vocab_size])
        fail("an id outside the vocabulary decoded")
    except ValueError as e:
        if "outside the vocabulary" not in str(e):
            fail(f"an id outside the vocabulary: {e}")
    try:
        Tokenizer(missing, lowercase="yes")
        fail("a str for lowercase was taken")
    except TypeError:
        pass


def main():
    if pretrain.loader.Loader is not pretrain_loader.Loader:
        fail("pretrain.loader.Loader is not pretrain_loader.Loader")
    with cu.tempdir() as tmp:
        docs = cu.test_data("sample-docs.jsonl")
        cu.run(cu.tool("train-tokenizer"), "-q", "--kind", "wordpiece", "--vocab-size", 500, "-o",
               os.path.join(tmp, "wp"), docs)
        cu.run(cu.tool("train-tokenizer"), "-q", "--kind", "sentencepiece", "--vocab-size", 100,
               "--character-coverage", 1.0, "-o", os.path.join(tmp, "spm"), docs)
        wordpiece = check("wordpiece (ours)", os.path.join(tmp, "wp", "vocab.txt"))
        check("sentencepiece (ours)", os.path.join(tmp, "spm", "spm.model"))
        bpe = check("bpe (ours)", cu.write_tiny_bpe(os.path.join(tmp, "bpe")))
        if bpe.kind != "bpe" or bpe.token_to_id("<|endoftext|>") != bpe.vocab_size - 1 or \
                bpe.special_ids.get("eod") != bpe.vocab_size - 1:
            fail(f"bpe: kind {bpe.kind}, special ids {bpe.special_ids}")
        if Tokenizer(pathlib.Path(tmp) / "wp").encode(LINES[0]) != wordpiece.encode(LINES[0]):
            fail("a pathlib.Path to the directory loads another tokenizer")
        if wordpiece.id_to_token(wordpiece.token_to_id("[CLS]")) != "[CLS]" or len(wordpiece) != wordpiece.vocab_size:
            fail("token_to_id / id_to_token / len disagree")
        check_threads(wordpiece)
        check_errors(tmp, wordpiece)

    shared = cu.shared_data()
    if shared:
        vocab = os.path.join(shared, "vocab")
        for name, file in (("bert-base-uncased", "bert-base-uncased-vocab.txt"), ("gpt2", "gpt2-encoder.json"),
                           ("spm test model", "spm-test_model.model")):
            if os.path.exists(os.path.join(vocab, file)):
                check(name, os.path.join(vocab, file))
    else:
        print("shared data absent: bert-base-uncased, GPT-2 and the SentencePiece test model skipped")
    cu.finish(failures)


if __name__ == "__main__":
    main()
