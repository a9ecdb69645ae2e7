"""bert_pretrain and gpt_pretrain end to end on the bundled sample (no shared data needed):
tests/data/sample-docs.jsonl → train-tokenizer → make-pretraining-shards → the trainers on CPU.
Checks:
  * both train: one log line per --log-interval, metrics.jsonl has one object per step with the
    fields scripts read, the loss falls;
  * resume: a run killed (SIGKILL) after its step-10 checkpoint and resumed with --resume logs
    losses for steps 11..20 that are bitwise those of an uninterrupted run (same threads);
  * the same seed gives the same losses again; --recompute changes nothing but memory;
  * exported weights load into HF's BertForPreTraining (when transformers is installed);
  * --precision fp16 (emulated on the CPU): loss scale 2^16, losses within 0.5% of fp32's;
  * bad input: shards with more ids than --vocab-size, a corrupt checkpoint, a diverging run
    (NaN), an unknown --precision, a missing --data, a full disk under --log-dir: each a clear
    message and exit 1 or 2.
"""
import json
import os
import signal
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "compat"))
import compat_util as cu  # noqa: E402

SRC = os.environ["PRETRAIN_SOURCE_DIR"]
failures = []


def fail(message):
    print(f"FAIL: {message}")
    failures.append(message)


tool = cu.run_tool  # tool(NAME, ARGS…, check=True): one of our tools, a failure ending the test


def metrics(log_dir):
    with open(os.path.join(log_dir, "metrics.jsonl")) as f:
        return [json.loads(line) for line in f]


def bert_args(shards, tmp, name, steps=20, *extra):
    """The common BERT command; an option in `extra` replaces the default of the same name."""
    defaults = {"--model": "tiny", "--batch-size": 8, "--lr": "1e-3", "--warmup": 5}
    for i, a in enumerate(extra):
        if a in defaults and i + 1 < len(extra):
            defaults.pop(a)
    flat = [x for kv in defaults.items() for x in kv]
    return ["bert_pretrain", "--data", shards, "--max-steps", steps, "--threads", 2, "--seed", 7,
            "--log-dir", os.path.join(tmp, name, "logs"), *flat, *extra]


def main():
    # HF transformers (for the export check) lives in the repo's .venv: run there when it exists.
    venv = os.path.join(SRC, ".venv", "bin", "python")
    if os.path.exists(venv) and not os.environ.get("PRETRAIN_IN_VENV"):
        os.environ["PRETRAIN_IN_VENV"] = "1"
        os.execv(venv, [venv] + sys.argv)
    with cu.tempdir() as tmp:
        shards = cu.sample_shards(tmp)
        bert, gpt = shards["bert"], shards["gpt"]

        # An uninterrupted BERT run, logging every 5 steps, with an export.
        export = os.path.join(tmp, "bert.safetensors")
        r = tool(*bert_args(bert, tmp, "full", 20, "--log-interval", 5, "--export", export))
        lines = [l for l in r.stdout.splitlines() if l.startswith("step ")]
        if len(lines) != 5:  # steps 1, 5, 10, 15, 20
            fail(f"expected 5 log lines, got {len(lines)}:\n{r.stdout}")
        for field in ("loss ", "(mlm", "nsp", "lr", "ms", "samples/s", "tokens/s", "TFLOPs", "MFU", "device", "host"):
            if field not in lines[-1]:
                fail(f"log line without '{field}': {lines[-1]}")
        full = metrics(os.path.join(tmp, "full", "logs"))
        if [m["step"] for m in full] != list(range(1, 21)):
            fail(f"metrics.jsonl steps {[m['step'] for m in full]}")
        for key in ("loss", "mlm_loss", "nsp_loss", "lr", "ms", "samples_per_s", "tokens_per_s", "tflops", "mfu"):
            if key not in full[0]:
                fail(f"metrics.jsonl has no '{key}'")
        if not sum(m["loss"] for m in full[-5:]) < sum(m["loss"] for m in full[:5]):
            fail(f"the BERT loss did not fall: {[round(m['loss'], 3) for m in full]}")
        print(f"bert: loss {full[0]['loss']:.4f} -> {full[-1]['loss']:.4f}; {full[-1]['samples_per_s']:.1f} samples/s")

        # The same run again: the same bits.
        again = tool(*bert_args(bert, tmp, "again", 20))
        if [m["loss"] for m in metrics(os.path.join(tmp, "again", "logs"))] != [m["loss"] for m in full]:
            fail("the same seed gave other losses")
        recompute = tool(*bert_args(bert, tmp, "recompute", 20, "--recompute"))
        rec = metrics(os.path.join(tmp, "recompute", "logs"))
        if [m["loss"] for m in rec] != [m["loss"] for m in full]:
            fail("--recompute changed the losses")
        if not rec[-1]["device_mb"] < full[-1]["device_mb"]:
            fail(f"--recompute did not lower the memory: {rec[-1]['device_mb']} vs {full[-1]['device_mb']} MB")
        del again, recompute

        # Killed after the step-10 checkpoint, then resumed: steps 11..20 are bitwise the same.
        ckpt = os.path.join(tmp, "ckpt")
        args = bert_args(bert, tmp, "killed", 20, "--checkpoint-dir", ckpt, "--save-interval", 10)
        p = subprocess.Popen([cu.tool(args[0]), *map(str, args[1:])], stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE, text=True)
        for line in p.stderr:
            if "step-00000010" in line:
                p.send_signal(signal.SIGKILL)
                break
        p.wait()
        if p.returncode != -signal.SIGKILL:
            fail(f"the run to be killed ended by itself (exit {p.returncode})")
        tool(*bert_args(bert, tmp, "resumed", 20, "--checkpoint-dir", ckpt, "--save-interval", 10, "--resume"))
        resumed = metrics(os.path.join(tmp, "resumed", "logs"))
        if [m["step"] for m in resumed] != list(range(11, 21)):
            fail(f"the resumed run logged steps {[m['step'] for m in resumed]}, expected 11..20")
        elif [m["loss"] for m in resumed] != [m["loss"] for m in full[10:]]:
            fail("resumed losses differ from the uninterrupted run's:\n"
                 f"{[m['loss'] for m in resumed]}\n{[m['loss'] for m in full[10:]]}")
        else:
            print("resume: steps 11..20 after a SIGKILL are bitwise the uninterrupted run's")

        # fp16 (emulated on the CPU): dynamic loss scaling at 2^16, losses close to fp32's.
        tool(*bert_args(bert, tmp, "fp16", 20, "--precision", "fp16"))
        half = metrics(os.path.join(tmp, "fp16", "logs"))
        worst = max(abs(a["loss"] - b["loss"]) / b["loss"] for a, b in zip(half, full))
        if len(half) != 20 or half[0]["loss_scale"] != 65536 or worst > 5e-3:
            fail(f"fp16: {len(half)} steps, loss scale {half[0].get('loss_scale')}, worst relative loss gap {worst:.2e}")
        else:
            print(f"fp16 (emulated): losses within {worst:.1e} of fp32's")

        # GPT on the Megatron shards.
        r = tool("gpt_pretrain", "--data", gpt, "--model", "tiny", "--seq-len", 32, "--batch-size", 8, "--max-steps", 30,
                 "--lr", "3e-3", "--warmup", 3, "--threads", 2, "--log-dir", os.path.join(tmp, "gpt-logs"),
                 "--log-interval", 10)
        g = metrics(os.path.join(tmp, "gpt-logs"))
        if len(g) != 30 or not g[-1]["loss"] < 0.8 * g[0]["loss"]:
            fail(f"gpt: {len(g)} steps, loss {g[0]['loss']:.3f} -> {g[-1]['loss']:.3f}")
        print(f"gpt: loss {g[0]['loss']:.4f} -> {g[-1]['loss']:.4f}; {g[-1]['tokens_per_s']:.0f} tokens/s")

        # Exported weights load into HF's BertForPreTraining.
        try:
            import importlib.util
            if not importlib.util.find_spec("transformers"):
                print("export: HF transformers not installed here (scripts/setup_deps.sh puts it in .venv); not loaded")
            else:
                from safetensors.torch import load_file
                from transformers import BertConfig, BertForPreTraining
                state = load_file(export)
                V = state["bert.embeddings.word_embeddings.weight"].shape[0]
                model = BertForPreTraining(BertConfig(vocab_size=V, hidden_size=128, num_hidden_layers=2,
                                                      num_attention_heads=2, intermediate_size=512))
                missing, unexpected = model.load_state_dict(state, strict=False)
                missing = [k for k in missing if not k.startswith("cls.predictions.decoder")]
                if missing or unexpected:
                    fail(f"HF BertForPreTraining: missing {missing}, unexpected {unexpected}")
                else:
                    print("export: loads into HF BertForPreTraining")
        except ImportError:
            pass

        # Bad input.
        def expect_error(args, code, words):
            r = tool(*args, check=False)
            if r.returncode != code or not all(w in r.stderr for w in words):
                fail(f"{' '.join(map(str, args[:1]))}: expected exit {code} and {words}, got {r.returncode}:\n{r.stderr}")
        expect_error(bert_args(bert, tmp, "bad", 2, "--vocab-size", 50), 2, ["--vocab-size 50", "smaller"])
        expect_error(bert_args(bert, tmp, "bad", 2, "--precision", "fp8"), 2, ["fp8", "bf16"])
        expect_error(bert_args(bert, tmp, "bad", 2, "--resume"), 2, ["--checkpoint-dir"])
        expect_error(["bert_pretrain", "--model", "tiny"], 2, ["--data"])
        expect_error(bert_args(bert, tmp, "bad", 2, "--model", "huge"), 2, ["huge", "base"])
        expect_error(bert_args(bert, tmp, "bad", 5, "--lr", "1e30", "--warmup", 0, "--max-grad-norm", 0), 1,
                     ["step", "first non-finite tensor"])
        # A full disk under --log-dir: the run ends naming metrics.jsonl (it dropped every line without a word).
        full_logs = os.path.join(tmp, "fulldisk", "logs")
        os.makedirs(full_logs)
        os.symlink("/dev/full", os.path.join(full_logs, "metrics.jsonl"))
        expect_error(bert_args(bert, tmp, "fulldisk", 2), 1, ["metrics.jsonl", "No space left on device"])
        last = os.path.join(ckpt, "step-00000020", "model.safetensors")
        with open(last, "r+b") as f:
            f.truncate(os.path.getsize(last) // 2)
        expect_error(bert_args(bert, tmp, "bad", 30, "--checkpoint-dir", ckpt, "--resume"), 1, [last])
    if failures:
        sys.exit(f"{len(failures)} check(s) failed")
    print("OK")


if __name__ == "__main__":
    main()
