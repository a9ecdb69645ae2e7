"""Shared by the Python compatibility tests: where things are, and skipping (exit 77)."""
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


def tool(name):
    """Path of one of our executables in the build tree."""
    for sub in ("formats", "tests/compat", "datagen", "tokenizer", "loader", "trainer", "."):
        p = os.path.join(build_dir(), sub, name)
        if os.path.exists(p):
            return p
    raise FileNotFoundError(f"{name} not built under {build_dir()}")


def run(*args, check=True):
    r = subprocess.run([str(a) for a in args], capture_output=True, text=True)
    if check and r.returncode != 0:
        sys.stderr.write(r.stdout + r.stderr)
        raise SystemExit(f"command failed ({r.returncode}): {' '.join(map(str, args))}")
    return r


def skip(reason):
    print(f"SKIP: {reason}")
    sys.exit(SKIP)


def tempdir():
    return tempfile.TemporaryDirectory(prefix="pretrain-compat-")
