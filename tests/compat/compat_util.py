"""Shared by the Python compatibility tests: where things are, and skipping (exit 77)."""
import json
import os
import subprocess
import sys
import tempfile

SKIP = 77


def shared_data():
    d = os.environ.get("PRETRAIN_SHARED_DATA") or os.environ.get("PRETRAIN_DEFAULT_SHARED_DATA", "")
    return d if d and os.path.isdir(d) else None


def build_dir():
    return os.environ["PRETRAIN_BUILD_DIR"]


def test_data(name):
    """Path of one of our own fixtures in tests/data/."""
    return os.path.join(os.environ["PRETRAIN_SOURCE_DIR"], "tests", "data", name)


def tool(name):
    """Path of one of our executables in the build tree."""
    for sub in ("formats", "tests/compat", "datagen", "tokenizer", "loader", "trainer", "."):
        p = os.path.join(build_dir(), sub, name)
        if os.path.exists(p):
            return p
    raise FileNotFoundError(f"{name} not built under {build_dir()}")


def run(*args, check=True, timeout=None):
    r = subprocess.run([str(a) for a in args], capture_output=True, text=True, timeout=timeout)
    if check and r.returncode != 0:
        sys.stderr.write(r.stdout + r.stderr)
        raise SystemExit(f"command failed ({r.returncode}): {' '.join(map(str, args))}")
    return r


def run_tool(name, *args, check=True, timeout=600):
    """One of our tools by name (tool()) with args; with check, a failure ends the test naming it."""
    return run(tool(name), *args, check=check, timeout=timeout)


def run_expecting(exe, *args, rc=0, stdin=None):
    """Runs one of our tools and fails the test unless it exits with `rc`; its output is text
    (undecodable bytes replaced)."""
    r = subprocess.run([exe, *map(str, args)], capture_output=True, stdin=stdin, text=True, errors="replace")
    if r.returncode != rc:
        fail(f"exit {r.returncode}, expected {rc}: {os.path.basename(exe)} {' '.join(map(str, args))}\n"
             f"{r.stdout}{r.stderr}")
    return r


def fail(message):
    print(f"FAIL: {message}")
    sys.exit(1)


def finish(failures):
    """Ends a test that collected its failures: FAIL with the list, or OK."""
    if failures:
        print("FAIL:\n  " + "\n  ".join(failures))
        sys.exit(1)
    print("OK")


def read_manifest(out):
    with open(os.path.join(out, "manifest.json")) as f:
        return json.load(f)


def skip(reason):
    print(f"SKIP: {reason}")
    sys.exit(SKIP)


def tempdir():
    return tempfile.TemporaryDirectory(prefix="pretrain-compat-")


def require_venv_modules(*modules):
    """The reference tokenizers (HF tokenizers/transformers, tiktoken) live in the repo's .venv
    (scripts/setup_deps.sh), not in Debian's python3. Re-run this script under .venv/bin/python
    when a module is missing here; skip only when the venv does not have it either."""
    import importlib.util
    if all(importlib.util.find_spec(m) for m in modules):
        return
    venv_python = os.path.join(os.environ.get("PRETRAIN_SOURCE_DIR", ""), ".venv", "bin", "python")
    if os.path.exists(venv_python) and os.path.realpath(sys.prefix) != os.path.realpath(os.path.dirname(os.path.dirname(venv_python))) \
            and not os.environ.get("PRETRAIN_IN_VENV"):
        os.environ["PRETRAIN_IN_VENV"] = "1"
        # Compare prefixes, not executables: the venv's python is a symlink to /usr/bin/python3.
        os.execv(venv_python, [venv_python] + sys.argv)
    skip(f"python modules {', '.join(modules)} not installed (run scripts/setup_deps.sh)")


def sample_shards(tmp, docs=None, bert_dupe=5, valid_fraction=0):
    """BERT and GPT shards from the bundled sample (or `docs`), as scripts/demo.sh makes them: a
    WordPiece vocabulary (1000) → BERT HDF5 (seq 64, 10 predictions, 2 shards); a SentencePiece
    model (100) → GPT Megatron .bin/.idx. With valid_fraction, that share of the documents is held
    out into <dir>/valid/. Returns {"bert": dir, "gpt": dir}."""
    split = ["--valid-fraction", valid_fraction] if valid_fraction else []
    docs = docs or test_data("sample-docs.jsonl")
    wordpiece, spm = os.path.join(tmp, "wordpiece"), os.path.join(tmp, "spm")
    run(tool("train-tokenizer"), "-q", "--kind", "wordpiece", "--vocab-size", 1000, "-o", wordpiece, docs)
    run(tool("train-tokenizer"), "-q", "--kind", "sentencepiece", "--vocab-size", 100, "--character-coverage", 1.0,
        "-o", spm, docs)
    out = {"bert": os.path.join(tmp, "bert"), "gpt": os.path.join(tmp, "gpt")}
    run(tool("make-pretraining-shards"), "-q", "--model", "bert", "-i", docs, "--tokenizer",
        os.path.join(wordpiece, "vocab.txt"), "-o", out["bert"], "--seq-len", 64, "--max-predictions", 10,
        "--dupe-factor", bert_dupe, "--num-shards", 2, *split)
    run(tool("make-pretraining-shards"), "-q", "--model", "gpt", "-i", docs, "--tokenizer",
        os.path.join(spm, "spm.model"), "-o", out["gpt"], *split)
    return out


def tokenize_cli(tokenizer, lines, *flags):
    """What the `tokenize` command writes for lines (no newlines inside), one list per line: ids
    (ints), or with --tokens the tokens, or with --decode (lines of ids) the text."""
    r = subprocess.run([tool("tokenize"), "-q", "--tokenizer", str(tokenizer), *map(str, flags)],
                       input="".join(line + "\n" for line in lines).encode(), capture_output=True)
    if r.returncode != 0:
        raise SystemExit(f"tokenize --tokenizer {tokenizer} {' '.join(map(str, flags))}: exit {r.returncode}\n"
                         f"{r.stderr.decode(errors='replace')}")
    out = r.stdout.decode().split("\n")[:-1]
    if "--decode" in flags:
        return out
    if "--tokens" in flags:
        return [line.split(" ") if line else [] for line in out]
    return [[int(x) for x in line.split()] for line in out]


def write_tiny_bpe(directory):
    """A GPT-2-style byte-level BPE vocabulary of our own (vocab.json + merges.txt): the 256 byte
    symbols, a few merges and <|endoftext|>. Returns the vocab.json path."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs, n = bs[:], 0
    for b in range(256):  # GPT-2's bytes_to_unicode: printable bytes stand for themselves
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    vocab = {chr(c): i for i, c in enumerate(cs)}  # GPT-2's order: printable bytes first
    merges = ["Ġ t", "h e", "Ġt he", "i n", "Ġ a", "e r", "Ġ s", "o n", "Ġthe r", "a n"]
    for m in merges:
        vocab.setdefault(m.replace(" ", ""), len(vocab))
    vocab["<|endoftext|>"] = len(vocab)
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, "vocab.json"), "w", encoding="utf-8") as f:
        json.dump(vocab, f, ensure_ascii=False)
    with open(os.path.join(directory, "merges.txt"), "w", encoding="utf-8") as f:
        f.write("#version: 0.2\n" + "\n".join(merges) + "\n")
    return os.path.join(directory, "vocab.json")


def differences(a, b):
    """The keys whose values differ between two {file: contents} maps, sorted."""
    return sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))
