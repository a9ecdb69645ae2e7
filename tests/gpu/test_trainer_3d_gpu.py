"""The (1,2,2) equivalence of tests/e2e/test_trainer_3d.py on GPUs: BERT and GPT tiny trained 20
steps at (data, tensor, pipeline) = (1,2,2) with --device cuda (NCCL tensor groups, pipeline sends,
streams) give the losses of one process on one GPU within 1e-5 and its final weights within 1e-4.
NCCL takes one rank per GPU, so this needs 4; it skips (exit 77) with fewer, or with none."""
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "e2e"))
sys.path.insert(0, os.path.join(HERE, "..", "compat"))
import compat_util as cu  # noqa: E402
import mpi_harness as h  # noqa: E402
import test_trainer_3d as grid  # noqa: E402
import test_trainer_mpi as mpi  # noqa: E402


def gpus():
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.TimeoutExpired):
        return 0
    return sum(line.startswith("GPU ") for line in out.splitlines())


def main():
    n = gpus()
    if n < 4:
        cu.skip(f"{n} GPU(s): the (1,2,2) layout needs 4 (NCCL takes one rank per GPU)")
    h.require_mpirun()
    cu.require_venv_modules("safetensors")  # for the weights
    with cu.tempdir() as tmp:
        shards = cu.sample_shards(tmp, mpi.repeated_docs(tmp, 16), bert_dupe=2)
        for kind in ("bert", "gpt"):
            st = lambda n: ["--device", "cuda", "--export", os.path.join(tmp, n + ".safetensors")]  # noqa: E731
            ref, _ = grid.train(kind, shards[kind], tmp, (1, 1, 1), 20, *st(f"{kind}-1"), name=f"{kind}-gpu-111")
            got, _ = grid.train(kind, shards[kind], tmp, (1, 2, 2), 20, *st(f"{kind}-4"), name=f"{kind}-gpu-122")
            mpi.close_losses(f"{kind} (1,2,2) on 4 GPUs against 1 GPU", got, ref)
            mpi.close_weights(f"{kind} (1,2,2) on 4 GPUs", os.path.join(tmp, f"{kind}-4.safetensors"),
                              os.path.join(tmp, f"{kind}-1.safetensors"))
    h.finish()


if __name__ == "__main__":
    main()
