"""PythonRandom (datagen/shards/python_random.h) against CPython's random.Random, live: long mixed streams
of random(), randint() over small and 50-bit ranges, getrandbits(1..64) and shuffle, for several
seeds. This is what lets `make-pretraining-shards --rng python` reproduce create_pretraining_data.py."""
import random
import sys

import compat_util as cu

ROUNDS = 3000


def expected(seed):
    r = random.Random(seed)
    out = []
    for i in range(ROUNDS):
        out.append(repr(r.random()))
        out.append(str(r.randint(0, i)))
        out.append(str(r.randint(2, 2 + (1 << (i % 50)))))
        out.append(str(r.getrandbits(1 + i % 64)))
        x = list(range(i % 40))
        r.shuffle(x)
        out.append("".join(f"{v} " for v in x))
    return out


def main():
    exe = cu.tool("python_random_dump")
    for seed in (0, 1, 12345, 2**33 + 1, -3):
        got = cu.run(exe, seed, ROUNDS).stdout.split("\n")[:-1]
        want = expected(seed)
        got = [repr(float(g)) if i % 5 == 0 else g for i, g in enumerate(got)]
        if got != want:
            k = next(i for i, (a, b) in enumerate(zip(got, want)) if a != b) if len(got) == len(want) else -1
            sys.exit(f"seed {seed}: first difference at value {k}: ours {got[k]!r}, python {want[k]!r}")
        print(f"seed {seed}: {len(want)} values equal")


if __name__ == "__main__":
    main()
