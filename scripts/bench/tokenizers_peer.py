"""The peers of scripts/bench/tokenizers.sh: HF tokenizers (Rust) and tiktoken on the same lines.
Prints `RESULT <case> <tokens/s> <seconds> <tokens>`, best of --runs, like bench_tokenizers.
HF's thread count is RAYON_NUM_THREADS, which must be set before `tokenizers` is imported, so the
caller runs one process per thread count.
  tokenizers_peer.py --case wordpiece_hf|bpe_hf|bpe_tiktoken --text F --threads N --vocab ... [--merges ...]"""
import argparse
import os
import sys
import time

ap = argparse.ArgumentParser()
ap.add_argument("--case", required=True)
ap.add_argument("--text", required=True)
ap.add_argument("--threads", type=int, default=1)
ap.add_argument("--runs", type=int, default=3)
ap.add_argument("--vocab", required=True)
ap.add_argument("--merges")
ap.add_argument("--lowercase", action="store_true")
a = ap.parse_args()
os.environ["RAYON_NUM_THREADS"] = str(a.threads)
os.environ["TOKENIZERS_PARALLELISM"] = "true"

with open(a.text, encoding="utf-8", newline="\n") as f:
    lines = f.read().split("\n")
if lines and lines[-1] == "":
    lines.pop()


def make():
    if a.case == "wordpiece_hf":
        from tokenizers import BertWordPieceTokenizer
        tok = BertWordPieceTokenizer(a.vocab, lowercase=a.lowercase)
        return lambda: sum(len(e.ids) for e in tok.encode_batch(lines, add_special_tokens=False))
    if a.case == "bpe_hf":
        from tokenizers import ByteLevelBPETokenizer
        tok = ByteLevelBPETokenizer(a.vocab, a.merges)
        return lambda: sum(len(e.ids) for e in tok.encode_batch(lines, add_special_tokens=False))
    if a.case == "bpe_tiktoken":
        import tiktoken
        import tiktoken.load as load
        load.read_file = lambda p: open(p, "rb").read()  # local files, no blobfile/download
        ranks = load.data_gym_to_mergeable_bpe_ranks(a.merges, a.vocab)
        enc = tiktoken.Encoding(
            name="gpt2", mergeable_ranks=ranks, special_tokens={"<|endoftext|>": 50256},
            pat_str=r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+""")
        if a.threads == 1:
            return lambda: sum(len(enc.encode_ordinary(l)) for l in lines)
        return lambda: sum(len(x) for x in enc.encode_ordinary_batch(lines, num_threads=a.threads))
    sys.exit(f"unknown case {a.case}")


best, tokens = float("inf"), 0
for _ in range(a.runs):
    run = make()  # fresh per run: no warm cache carried over, as on our side
    t0 = time.perf_counter()
    tokens = run()
    best = min(best, time.perf_counter() - t0)
print(f"RESULT {a.case} {tokens / best:.1f} {best:.4f} {tokens}")
