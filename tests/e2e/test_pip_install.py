"""`pip install <source root>` into a fresh venv (--system-site-packages: Debian's numpy and torch),
offline with the pinned build backend from .venv/wheelhouse (scripts/setup_deps.sh), then from a
directory outside the source tree: the installed package imports under both names (pretrain.loader,
pretrain.tokenizer; pretrain_loader) from the venv, scripts/examples/torch_loop.py trains on small
shards made with the built tools through the installed loader, and the installed tokenizers give the
`tokenize` command's ids, decoded text and batches for a WordPiece vocabulary and a SentencePiece
model trained here and, with the shared data, bert-base-uncased, GPT-2 and SentencePiece's test model.

The build goes to <build>/pip-build (scikit-build-core's build-dir), so a rerun recompiles only what
changed; PRETRAIN_PIP_COLD=1 builds in a fresh directory. Times are printed.
"""
import json
import os
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "compat"))
import compat_util as cu  # noqa: E402

SRC = os.environ["PRETRAIN_SOURCE_DIR"]
WHEELHOUSE = os.path.join(SRC, ".venv", "wheelhouse")
LINES = [
    "The bay opens to the sea; tides follow a pattern.",
    "Hello [MASK] world<|endoftext|>and   spaces",
    "Café naïve résumé — 12,345.67",
    "東京は日本の首都です。 עברית",
    "",
]
# Run by the venv's python, outside the source tree: the installed tokenizers on each vocabulary.
ENCODE = """
import json, sys
import pretrain, pretrain_loader
from pretrain.tokenizer import Tokenizer
cases = json.load(sys.stdin)
out = {"files": [pretrain.__file__, pretrain_loader.__file__, pretrain.tokenizer.Tokenizer.__module__], "cases": {}}
for name, (path, lines, ids) in cases.items():
    tok = Tokenizer(path)
    out["cases"][name] = {"encode": [tok.encode(l) for l in lines], "batch": tok.encode_batch(lines),
                          "decode": [tok.decode(i) for i in ids]}
print(json.dumps(out))
"""
failures = []


def fail(message):
    print(f"FAIL: {message}")
    failures.append(message)


def timed(what, args, **kwargs):
    start = time.perf_counter()
    r = subprocess.run([str(a) for a in args], capture_output=True, text=True, **kwargs)
    seconds = time.perf_counter() - start
    if r.returncode != 0:
        cu.fail(f"{what}: exit {r.returncode}: {' '.join(map(str, args))}\n{r.stdout[-6000:]}{r.stderr[-6000:]}")
    print(f"{what}: {seconds:.1f} s")
    return r


def main():
    if not os.path.isdir(WHEELHOUSE) or not any(f.startswith("scikit_build_core") for f in os.listdir(WHEELHOUSE)):
        cu.skip(f"no build backend in {WHEELHOUSE} (scripts/setup_deps.sh downloads it)")
    try:
        import torch  # noqa: F401
    except ImportError:
        cu.skip("torch is not installed for this python (Debian: python3-torch)")
    build_dir = os.path.join(cu.build_dir(), "pip-build")
    if os.environ.get("PRETRAIN_PIP_COLD"):
        shutil.rmtree(build_dir, ignore_errors=True)
    with cu.tempdir() as tmp:
        venv = os.path.join(tmp, "venv")
        python = os.path.join(venv, "bin", "python")
        # No pip of its own (ensurepip takes seconds): Debian's pip, visible through the system
        # site packages, installs into the venv it runs in.
        timed("venv", [sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", venv])
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PRETRAIN_", "PIP_", "PYTHON"))}
        env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
        # Unix Makefiles build one file at a time unless told: a cold build is ~3 CPU-minutes.
        env.setdefault("CMAKE_BUILD_PARALLEL_LEVEL", str(os.cpu_count() or 2))
        r = timed("pip install", [python, "-m", "pip", "install", "--no-index", "--find-links", WHEELHOUSE,
                                  "--config-settings", f"build-dir={build_dir}", SRC], env=env, cwd=tmp, timeout=900)
        if "Successfully installed pretrain" not in r.stdout:
            fail(f"pip did not say it installed pretrain:\n{r.stdout[-3000:]}")

        # Shards and vocabularies from the built tools, as the other e2e tests make them.
        outside = os.path.join(tmp, "work")
        os.makedirs(outside)
        shards = cu.sample_shards(tmp)
        r = timed("torch_loop.py (bert, installed loader)",
                  [python, os.path.join(SRC, "scripts", "examples", "torch_loop.py"), "--model", "bert",
                   shards["bert"], "--steps", 12, "--batch-size", 8, "--threads", 2], env=env, cwd=outside, timeout=300)
        summary = json.loads(r.stdout.strip().splitlines()[-1])
        if summary["steps"] != 12 or summary["resumed_identical"] is not True:
            fail(f"torch_loop.py: {summary}")
        if not summary["module"].startswith(venv):
            fail(f"torch_loop.py used {summary['module']}, not the module installed in {venv}")

        cases = {"wordpiece (ours)": os.path.join(tmp, "wordpiece", "vocab.txt"),
                 "sentencepiece (ours)": os.path.join(tmp, "spm", "spm.model")}
        shared = cu.shared_data()
        for name, file in (("bert-base-uncased", "bert-base-uncased-vocab.txt"), ("gpt2", "gpt2-encoder.json"),
                           ("spm test model", "spm-test_model.model")):
            if shared and os.path.exists(os.path.join(shared, "vocab", file)):
                cases[name] = os.path.join(shared, "vocab", file)
            else:
                print(f"{name}: skipped (not in the shared data)")
        expected = {name: cu.tokenize_cli(path, LINES) for name, path in cases.items()}
        decoded = {name: cu.tokenize_cli(path, [" ".join(map(str, i)) for i in expected[name]], "--decode")
                   for name, path in cases.items()}
        payload = json.dumps({name: [path, LINES, expected[name]] for name, path in cases.items()})
        r = timed("installed tokenizers", [python, "-c", ENCODE], env=env, cwd=outside, input=payload, timeout=300)
        got = json.loads(r.stdout)
        files = got["files"]
        if not all(f.startswith(venv) for f in files[:2]) or files[2] != "pretrain._tokenizer":
            fail(f"imported from {files}, not from {venv}")
        for name in cases:
            g = got["cases"][name]
            if g["encode"] != expected[name] or g["batch"] != expected[name]:
                fail(f"{name}: encode/encode_batch {g['encode']} / {g['batch']}, tokenize says {expected[name]}")
            if g["decode"] != decoded[name]:
                fail(f"{name}: decode {g['decode']}, tokenize --decode says {decoded[name]}")
            print(f"{name}: the command's ids and text ({sum(map(len, expected[name]))} ids)")
    cu.finish(failures)


if __name__ == "__main__":
    main()
