"""Every mpirun job across real hosts: 3 network namespaces with their own hostnames and /tmp,
joined by a switch, TCP between every pair of ranks (tests/e2e/hosts.py; skipped where the
machine cannot make them). On the bundled sample:
  * where ranks run (rank_probe): 2 per host on 3 hosts, each rank names its own host and its
    Communicator's local rank, 0 or 1 on that host (one per host: 0 each), the rank by which a
    trainer picks its GPU; the lines are rank 0's, gathered from the others over TCP;
  * a directory in PRETRAIN_HOSTS_READONLY is written by node0's rank and refused to node1's (the
    check the trainer runs below rely on);
  * wikiprep on 3 hosts (one rank each) writes the bytes of one process;
  * make-pretraining-shards on 3 hosts writes the BERT and the GPT shards of one process;
  * bert_pretrain and gpt_pretrain launched as users do, `scripts/run_multi_node.sh --hostfile`,
    on 2 hosts × 2 ranks: data parallel 4 with ZeRO-1 and a (tensor 2, pipeline 2) grid, each
    with the losses of one process (relative 1e-5) at every step; their log and checkpoint
    directories are read-only on the second host, so a rank there that wrote any of it (a
    checkpoint, metrics, a lock) would fail the run: rank 0 alone writes them;
  * the checkpoint the 2-host (tensor 2, pipeline 2) GPT run saved at step 4 resumes in one
    process on one host with the uninterrupted losses;
  * after all of it, nothing is left in any host's own /tmp: the tools share their work through
    the output directories, never through a node's temporary files."""
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "compat"))
import compat_util as cu  # noqa: E402
import hosts as hh  # noqa: E402
import mpi_harness as h  # noqa: E402
import test_trainer_mpi as mpi  # noqa: E402

SRC = os.environ["PRETRAIN_SOURCE_DIR"]
RUN_MULTI_NODE = os.path.join(SRC, "scripts", "run_multi_node.sh")
STEPS = 8
LR = {"bert": "2e-3", "gpt": "6e-4"}  # test_trainer_3d.py's, for the same reasons


def where_ranks_run(hosts):
    probe = cu.tool("rank_probe")
    for np, per_host in ((6, 2), (3, None)):
        lines = hosts.run(hosts.mpirun(np, probe, per_host=per_host), timeout=120).stdout.splitlines()
        want = [f"rank {r} of {np}: host node{r // (per_host or 1)}, local rank {r % (per_host or 1)}" for r in range(np)]
        if lines != want:
            h.fail(f"{np} ranks on 3 hosts: the ranks say\n  " + "\n  ".join(lines) + "\nexpected\n  " + "\n  ".join(want))
        else:
            print(f"{np} ranks on 3 hosts: {'; '.join(line.split(': ', 1)[1] for line in lines)}")


def others_cannot_write(hosts, tmp):
    """The check the trainer runs rely on: with PRETRAIN_HOSTS_READONLY, a rank on node1 cannot
    write where node0's can."""
    out = os.path.join(tmp, "readonly")
    os.makedirs(out)
    r = hosts.run(hosts.mpirun(2, "bash", "-c", f"touch {out}/$(hostname)"), rc=1, timeout=60,
                  env={"PRETRAIN_HOSTS_READONLY": out})
    if sorted(os.listdir(out)) != ["node0"] or "Read-only file system" not in r.stdout + r.stderr:
        h.fail(f"a rank on node1 wrote to a directory read-only there, or node0's could not: {sorted(os.listdir(out))}\n"
               f"{r.stdout[-800:]}{r.stderr[-800:]}")
    else:
        print("PRETRAIN_HOSTS_READONLY: node0's rank wrote, node1's was refused")


def same_across_hosts(name, hosts, tool, args, out_of, enough, volatile=()):
    """tool with args (and -o <out>) in one process here and on 3 hosts, one rank each: the same files."""
    def run_at(np):
        out = out_of(np)
        command = [cu.tool(tool), *args, "-o", out, "--quiet", "--threads", 1]
        hosts.run(hosts.mpirun(np, *command) if np > 1 else command, timeout=120)
        return h.files(out, volatile)
    return h.same_at(f"{name} (N = 3: one rank on each of 3 hosts)", (1, 3), run_at, enough)


def trainer_args(kind):
    args = ["--dropout", 0, "--lr", LR[kind], "--warmup", 2, "--seed", 3, "--layers", 4, "--grad-accum", 2]
    return args + (["--seq-len", 32] if kind == "gpt" else [])


def one_process(kind, shards, log_dir, *extra, steps=STEPS):
    """The trainer in one process, with the flags run_multi_node.sh gives it; its metrics."""
    tool = cu.tool(f"{kind}_pretrain")
    cu.run(tool, "--data", shards, "--model", "tiny", "--batch-size", 4, "--precision", "fp32", "--max-steps", steps,
           "--device", "cpu", "--log-interval", 1, "--threads", 1, *trainer_args(kind), "--log-dir", log_dir, *extra)
    return h.metrics(log_dir)


def multi_node(hosts, kind, shards, out, case, batch, *extra):
    """scripts/run_multi_node.sh --hostfile (3 hosts; the case takes the first 2) on node0, its logs
    and the trainer's --log-dir under `out`, which the other hosts see read-only. Its metrics."""
    log_dir = os.path.join(out, "metrics")
    os.makedirs(log_dir)
    mpi_args = " ".join(map(str, hosts.mca()))
    command = [RUN_MULTI_NODE, "--hostfile", hosts.hostfile, "--data", shards, "--model", kind, "--model-size", "tiny", "--batch-size", batch,
               "--steps", STEPS, "--runs", 1, "--device", "cpu", "--cases", case, "--log-root", os.path.join(out, "logs"),
               "--build-dir", cu.build_dir(), "--mpi-args", mpi_args, "--", *trainer_args(kind), "--log-dir", log_dir, *extra]
    r = hosts.run(hosts.on("node0", *command), timeout=240, env={"PRETRAIN_HOSTS_READONLY": out})
    if f"{case} run 1/1" not in r.stdout:
        h.fail(f"run_multi_node.sh {case}: no run reported:\n{r.stdout[-1500:]}{r.stderr[-1500:]}")
    return h.metrics(log_dir)


def main():
    h.require_mpirun()
    started = time.monotonic()
    with cu.tempdir() as tmp, hh.hosts_or_skip(3, shared=[tmp]) as hosts:
        print(f"3 hosts made in {time.monotonic() - started:.1f} s")
        where_ranks_run(hosts)
        others_cannot_write(hosts, tmp)

        # Data preparation, one rank per host.
        same_across_hosts("wikiprep", hosts, "wikiprep", [cu.test_data("sample-dump.xml"), "--shard-bytes", 500],
                          lambda np: os.path.join(tmp, f"wikiprep-{np}"), lambda files: len(files) > 3,
                          [("stats", "seconds"), ("extra", "warnings")])
        docs = mpi.repeated_docs(tmp, 16)  # 96 documents: blocks of 16 for every rank to tokenize
        vocab = os.path.join(tmp, "wordpiece")
        spm = os.path.join(tmp, "spm")
        cu.run(cu.tool("train-tokenizer"), "-q", "--kind", "wordpiece", "--vocab-size", 1000, "-o", vocab, docs)
        cu.run(cu.tool("train-tokenizer"), "-q", "--kind", "sentencepiece", "--vocab-size", 100,
               "--character-coverage", 1.0, "-o", spm, docs)
        timing = [("stats", k) for k in ("seconds", "stage_seconds", "stage_cpu_seconds")]
        shards = {"bert": os.path.join(tmp, "bert-1"), "gpt": os.path.join(tmp, "gpt-1")}
        same_across_hosts("make-pretraining-shards bert", hosts, "make-pretraining-shards",
                          ["-i", docs, "--tokenizer", os.path.join(vocab, "vocab.txt"), "--seq-len", 64,
                           "--max-predictions", 10, "--dupe-factor", 2, "--num-shards", 2],
                          lambda np: os.path.join(tmp, f"bert-{np}"), lambda f: any(k.endswith(".hdf5") for k in f), timing)
        same_across_hosts("make-pretraining-shards gpt", hosts, "make-pretraining-shards",
                          ["--model", "gpt", "-i", docs, "--tokenizer", os.path.join(spm, "spm.model"), "--num-shards", 2],
                          lambda np: os.path.join(tmp, f"gpt-{np}"), lambda f: any(k.endswith(".bin") for k in f), timing)

        # Training across 2 hosts, launched as users do.
        for kind in ("bert", "gpt"):
            ref = one_process(kind, shards[kind], os.path.join(tmp, f"{kind}-ref"))
            zero = multi_node(hosts, kind, shards[kind], os.path.join(tmp, f"{kind}-zero"), "2n2g", 1, "--zero", 1)
            mpi.close_losses(f"{kind}: 2 hosts × 2 ranks, data parallel 4, ZeRO-1, against one process", zero, ref)
            out = os.path.join(tmp, f"{kind}-grid")
            ckpt = os.path.join(out, "ckpt")
            os.makedirs(ckpt)
            grid = multi_node(hosts, kind, shards[kind], out, "2n2g:tp2pp2", 4,
                              *(["--checkpoint-dir", ckpt, "--save-interval", STEPS // 2] if kind == "gpt" else []))
            mpi.close_losses(f"{kind}: 2 hosts × 2 ranks, tensor 2 × pipeline 2, against one process", grid, ref)
            if kind == "gpt":
                # The 2-host checkpoint of step 4 (not the final one), resumed in one process on one host.
                again = os.path.join(tmp, "gpt-resumed-ckpt")
                os.makedirs(again)
                half = f"step-{STEPS // 2:08d}"
                subprocess.run(["cp", "-r", os.path.join(ckpt, half), again], check=True)
                with open(os.path.join(again, "latest"), "w") as f:
                    f.write(half + "\n")
                resumed = one_process(kind, shards[kind], os.path.join(tmp, "gpt-resumed"), "--checkpoint-dir", again,
                                      "--resume")
                mpi.close_losses("gpt: the 2-host (tensor 2, pipeline 2) checkpoint of step 4 resumed in one process",
                                 resumed, ref[STEPS // 2:])

        left = {host: files for host, files in hosts.local_files().items() if files}
        if left:
            h.fail(f"files left in the hosts' own /tmp: {left}")
        else:
            print("nothing left in any host's /tmp")
    print(f"{time.monotonic() - started:.0f} s")
    h.finish()


if __name__ == "__main__":
    main()
