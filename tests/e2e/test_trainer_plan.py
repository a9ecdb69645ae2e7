"""--plan against what the trainer allocates. For BERT and GPT tiny at several layouts of the
data × tensor × pipeline grid (with ZeRO-1, --recompute, sequence parallel and the interleaved
schedule among them), `--plan` predicts each rank's device memory without reading data or
allocating; a real run of the same layout then reports every rank's peak of allocated arenas
("memory: rank R (tensor t, data d, stage s): X MiB allocated at peak"). Each rank's figure must be
within 5% of its stage's planned total. Also: the plan of one of seed 003's cases (32 ranks,
tensor 4 × pipeline 4) prints without mpirun, --device-memory-gb says whether each rank fits, and
a layout the trainer would refuse is refused by --plan with the same message.
"""
import json
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "compat"))
import compat_util as cu  # noqa: E402
import mpi_harness as h  # noqa: E402

# (kind, data, tensor, pipeline, extra flags)
CASES = [
    ("bert", 1, 1, 1, []),
    ("gpt", 1, 1, 1, ["--recompute"]),
    ("bert", 1, 2, 2, ["--sequence-parallel"]),
    ("gpt", 1, 2, 2, []),
    ("gpt", 1, 1, 2, ["--virtual-stages", 2, "--grad-accum", 4]),
    ("bert", 2, 1, 2, ["--zero", 1, "--optimizer", "lamb"]),
    ("gpt", 2, 2, 1, ["--zero", 1, "--recompute"]),
]
TOLERANCE = 0.05


def plan_rows(text):
    """{stage: {column: value}} from --plan's table."""
    lines = [line for line in text.splitlines() if line and not line.startswith("plan:")]
    header = re.split(r"\s{2,}", lines[0].strip())
    rows = {}
    for line in lines[1:]:
        cells = re.split(r"\s{2,}", line.strip())
        if len(cells) == len(header) and cells[0].isdigit():
            rows[int(cells[0])] = dict(zip(header, cells))
    return rows


def main():
    h.require_mpirun()
    with cu.tempdir() as tmp:
        shards = cu.sample_shards(tmp, bert_dupe=2)
        manifests = {k: json.load(open(os.path.join(d, "manifest.json"))) for k, d in shards.items()}
        for kind, data, tensor, pipeline, extra in CASES:
            np = data * tensor * pipeline
            tool = cu.tool("bert_pretrain" if kind == "bert" else "gpt_pretrain")
            m = manifests[kind]
            vocab = m["tokenizer"]["vocab_size"]
            shape = ["--model", "tiny", "--layers", 4, "--batch-size", 2, "--tensor-parallel", tensor,
                     "--pipeline-parallel", pipeline, "--vocab-size", vocab, *extra]
            if "--grad-accum" not in extra:
                shape += ["--grad-accum", 2]
            if kind == "gpt":
                shape += ["--seq-len", 32]
            else:
                shape += ["--seq-len", m["seq_len"], "--max-predictions", m["max_predictions"]]
            what = f"{kind} ({data},{tensor},{pipeline}) {' '.join(map(str, extra))}".strip()
            plan = h.run([tool, "--plan", "--world-size", np, *shape, "--device-memory-gb", 1])
            rows = plan_rows(plan.stdout)
            if sorted(rows) != list(range(pipeline)):
                h.fail(f"{what}: the plan has stages {sorted(rows)}, expected {pipeline}:\n{plan.stdout}")
                continue
            if any(r["fits 1 GB"] != "yes" for r in rows.values()):
                h.fail(f"{what}: a tiny model does not fit 1 GB?\n{plan.stdout}")
            total = "total ZeRO-1" if "--zero" in extra else "total"
            args = [tool, "--data", shards[kind], *shape, "--max-steps", 2, "--threads", 1, "--dropout", 0,
                    "--log-interval", 1000]
            r = h.run(h.mpirun(np, *args))
            got = re.findall(r"memory: rank (\d+) \(tensor (\d+), data (\d+), stage (\d+)\): ([\d.]+) MiB", r.stdout)
            if len(got) != np:
                h.fail(f"{what}: {len(got)} memory lines for {np} ranks:\n{r.stdout[-1500:]}")
                continue
            worst = 0.0
            for rank, t, d, stage, mib in got:
                want = float(rows[int(stage)][total])
                off = abs(float(mib) - want) / want
                worst = max(worst, off)
                if off > TOLERANCE:
                    h.fail(f"{what}: rank {rank} (stage {stage}) allocated {mib} MiB, planned {want} ({off:.1%} off)")
            print(f"{what}: {np} ranks within {worst:.2%} of the plan "
                  f"({', '.join(rows[s][total] for s in sorted(rows))} MiB by stage)")

        # Seed 003's 2D_PP_2x4x4_512_2304x24 without mpirun: 4 stages of a 24-layer GPT, and a
        # 16 GB V100 does not hold its fp32 storage without ZeRO-1.
        gpt = cu.tool("gpt_pretrain")
        seed = [gpt, "--plan", "--world-size", 32, "--tensor-parallel", 4, "--pipeline-parallel", 4, "--layers", 24,
                "--hidden", 2304, "--heads", 24, "--seq-len", 2048, "--max-positions", 2048, "--batch-size", 8,
                "--grad-accum", 32, "--recompute", "--device-memory-gb", 16]
        r = h.run(seed)
        rows = plan_rows(r.stdout)
        if sorted(rows) != [0, 1, 2, 3] or rows[0]["ranks"] != "0-7" or rows[3]["slots"] != "1" or rows[0]["slots"] != "4":
            h.fail(f"seed 003 2D_PP_2x4x4: unexpected plan:\n{r.stdout}")
        else:
            print("seed 003 2D_PP_2x4x4_512_2304x24:\n" + r.stdout)

        # Refusals, with the trainer's own messages (exit 2).
        for extra, want in ((["--tensor-parallel", 4], "does not divide the model's 2 attention heads"),
                            (["--pipeline-parallel", 2, "--layers", 3], "3 layers do not split evenly"),
                            (["--world-size", 3, "--tensor-parallel", 2], "3 ranks do not divide into tensor 2")):
            r = h.run([gpt, "--plan", "--model", "tiny", *extra], rc=None)
            out = r.stdout + r.stderr
            if r.returncode != 2 or want not in out:
                h.fail(f"--plan {extra}: exit {r.returncode}, no '{want}' in:\n{out[-800:]}")
            else:
                print(f"refused: --plan {' '.join(map(str, extra))}: {want}")
    h.finish()


if __name__ == "__main__":
    main()
