"""train-tokenizer end to end on the bundled sample (no shared data needed):

- WordPiece from tests/data/sample-docs.jsonl (the demo's command): [PAD] [UNK] [CLS] [SEP] [MASK]
  first, the same bytes at --threads 1 and 2, the same from a zstd copy and from a .txt of its
  paragraphs; `tokenize --tokenizer OUT/vocab.txt` reads it.
- SentencePiece from the same sample (small vocabulary): spm.model loads with tokenize.
- Bad input: a missing input (exit 2), a malformed JSON line (exit 1, naming file and line), a
  vocabulary too large for the text (exit 1, the library's message); nothing left in OUT."""
import json
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "compat"))
import compat_util as cu  # noqa: E402

EXE = cu.tool("train-tokenizer")
SAMPLE = cu.test_data("sample-docs.jsonl")


def fail(message):
    print(f"FAIL: {message}")
    sys.exit(1)


def run(*args, rc=0):
    r = subprocess.run([EXE, "--quiet", *map(str, args)], capture_output=True, text=True)
    if r.returncode != rc:
        fail(f"exit {r.returncode}, expected {rc}: train-tokenizer {' '.join(map(str, args))}\n{r.stdout}{r.stderr}")
    return r


def read(path):
    with open(path, "rb") as f:
        return f.read()


def main():
    with cu.tempdir() as tmp:
        out = {}
        for name, threads in (("t1", 1), ("t2", 2)):
            run("--kind", "wordpiece", "--vocab-size", 1000, "-o", os.path.join(tmp, name), "--threads", threads, SAMPLE)
            out[name] = read(os.path.join(tmp, name, "vocab.txt"))
        vocab = out["t1"].decode().split("\n")[:-1]
        if vocab[:5] != ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] or len(vocab) < 100:
            fail(f"unexpected vocabulary: {vocab[:10]} … ({len(vocab)} entries)")
        if out["t1"] != out["t2"]:
            fail("--threads 1 and 2 give different vocab.txt")
        if shutil.which("zstd"):
            zst = os.path.join(tmp, "docs.jsonl.zst")
            subprocess.run(["zstd", "-q", SAMPLE, "-o", zst], check=True)
            run("--kind", "wordpiece", "--vocab-size", 1000, "-o", os.path.join(tmp, "zst"), zst)
            if read(os.path.join(tmp, "zst", "vocab.txt")) != out["t1"]:
                fail("the zstd copy gives another vocabulary")
        text = os.path.join(tmp, "sample.txt")
        with open(SAMPLE, encoding="utf-8") as f, open(text, "w", encoding="utf-8") as t:
            for line in f:
                if line.strip():
                    t.write(json.loads(line)["text"] + "\n")
        run("--kind", "wordpiece", "--vocab-size", 1000, "-o", os.path.join(tmp, "txt"), text)
        if read(os.path.join(tmp, "txt", "vocab.txt")) != out["t1"]:
            fail("the paragraphs as a .txt file give another vocabulary")
        tokenize = cu.tool("tokenize")
        r = subprocess.run([tokenize, "--tokenizer", os.path.join(tmp, "t1", "vocab.txt"), "--tokens", "--quiet"],
                           input="The history of the article\n", capture_output=True, text=True)
        if r.returncode != 0 or not r.stdout.strip():
            fail(f"tokenize cannot use the trained vocab.txt: {r.stderr}")
        print(f"wordpiece: {len(vocab)} entries; tokenize: {r.stdout.strip()}")

        spm = os.path.join(tmp, "spm")
        run("--kind", "sentencepiece", "--vocab-size", 100, "--character-coverage", 1.0, "-o", spm, SAMPLE)
        r = subprocess.run([tokenize, "--tokenizer", os.path.join(spm, "spm.model"), "--tokens", "--quiet"],
                           input="The history of the article\n", capture_output=True, text=True)
        if r.returncode != 0 or not r.stdout.strip():
            fail(f"tokenize cannot use the trained spm.model: {r.stderr}")
        print(f"sentencepiece: {len(read(os.path.join(spm, 'spm.vocab')).splitlines())} pieces; tokenize: {r.stdout.strip()}")

        bad_out = os.path.join(tmp, "bad")
        missing = os.path.join(tmp, "missing.jsonl")
        r = run("--kind", "wordpiece", "--vocab-size", 100, "-o", bad_out, missing, rc=2)
        if missing not in r.stderr:
            fail(f"the error does not name the missing input: {r.stderr}")
        malformed = os.path.join(tmp, "malformed.jsonl")
        with open(malformed, "w") as f:
            f.write('{"text": "fine"}\n{"text": broken}\n')
        r = run("--kind", "wordpiece", "--vocab-size", 100, "-o", bad_out, malformed, rc=1)
        if f"{malformed}:2" not in r.stderr:
            fail(f"the error does not name the file and line: {r.stderr}")
        r = run("--kind", "sentencepiece", "--vocab-size", 100000, "-o", bad_out, SAMPLE, rc=1)
        if "Vocabulary size too high" not in r.stderr:
            fail(f"no library message for a too large vocabulary: {r.stderr}")
        if os.path.isdir(bad_out) and os.listdir(bad_out):
            fail(f"failed runs left files: {os.listdir(bad_out)}")
    print("OK")


if __name__ == "__main__":
    main()
