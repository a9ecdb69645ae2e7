"""make-pretraining-shards end to end, on the real English Wikipedia excerpt's wikiextractor text
(../shared/data) and, without shared data, on our bundled sample:

- BERT with the counter RNG: byte-identical shards at 1 and 2 threads, and with the token store read
  through pread windows (a store past its resident budget); equal shard sizes (±1);
  h5py reads every shard and every record is well formed (CLS/SEP where they belong, positions
  sorted inside the sequence, never on CLS/SEP, labels = the original tokens); statistics within the
  issue's bounds (masked 15% ± 0.5%, 80/10/10 ± 2%, NSP random 50% ± 2%, short targets ≈ 10%).
- Interrupted after one shard, then --resume: the same bytes as an uninterrupted run.
- --bin-size (LDDL's length bins): each bin a plain NVIDIA shard set h5py reads, together the
  unbinned run's records, each in its bin; the same bytes at 1 and 2 threads; shard-tool verify.
- Killed (SIGKILL) while tokenizing, then --resume: it continues from the last checkpoint (not
  from the start) and gives the same bytes as an uninterrupted run.
- GPT: Megatron and llm.c outputs hold every document once, each ending in EOD; valid split.
- Work files (issue #49): --keep-work gives the same output (BERT with a valid split, GPT); a run
  failing at each stage boundary (store made, instances made, store freed, GPT spread chunk given
  back, a shard committed) and resumed gives the uninterrupted output; the disk at its peak
  (polled) holds at most 1.5x the output for BERT seq 128 dupe 5 and for GPT, where a --keep-work
  run's peak (the control: what the bound used to be) is twice the output or more.
- Bad input: a vocabulary without [MASK], a corrupt input: exit 1 naming the file, no shard left."""
import glob
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "compat"))
import compat_util as cu  # noqa: E402

import h5py  # noqa: E402
import numpy as np  # noqa: E402

EXE, SAMPLE = cu.tool("make-pretraining-shards"), cu.test_data("sample-docs.jsonl")
ENWIKI = "wikipedia/enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.wikiextractor.jsonl"


fail, manifest = cu.fail, cu.read_manifest


def run(*args, rc=0):
    return cu.run_expecting(EXE, *args, rc=rc)


def files_bytes(out, pattern):
    result = {}
    for p in sorted(glob.glob(os.path.join(out, pattern))):
        with open(p, "rb") as f:
            result[os.path.basename(p)] = f.read()
    return result


def check_bert_records(out, vocab_size, cls=101, sep=102, mask=103):
    n = 0
    for path in sorted(glob.glob(os.path.join(out, "train-*.hdf5"))):
        with h5py.File(path, "r") as f:
            ids, seg, msk = f["input_ids"][...], f["segment_ids"][...], f["input_mask"][...]
            pos, lab, nsp = f["masked_lm_positions"][...], f["masked_lm_ids"][...], f["next_sentence_labels"][...]
        for i in range(ids.shape[0]):
            length = int(msk[i].sum())
            if not (msk[i, :length] == 1).all() or (ids[i, length:] != 0).any():
                fail(f"{path} record {i}: input_mask does not cover exactly the tokens")
            a_end = int((seg[i, :length] == 0).sum())  # [CLS] A [SEP] have segment 0, B [SEP] segment 1
            if ids[i, 0] != cls or ids[i, a_end - 1] != sep or ids[i, length - 1] != sep or \
                    (seg[i, a_end:length] != 1).any() or a_end < 3 or length - a_end < 2:
                fail(f"{path} record {i}: not [CLS] A [SEP] B [SEP]")
            p = pos[i][pos[i] > 0]
            if len(p) == 0 or list(p) != sorted(p) or p.max() >= length - 1:
                fail(f"{path} record {i}: masked positions {pos[i]} not sorted inside the sequence")
            if (lab[i][:len(p)] == cls).any() or (lab[i][:len(p)] == sep).any() or (lab[i][:len(p)] >= vocab_size).any():
                fail(f"{path} record {i}: a label is [CLS]/[SEP] or outside the vocabulary")
            if nsp[i] not in (0, 1):
                fail(f"{path} record {i}: next_sentence_label {nsp[i]}")
        n += ids.shape[0]
    return n


def bert_checks(data, tmp):
    vocab = os.path.join(data, "vocab", "bert-base-uncased-vocab.txt")
    text = os.path.join(data, ENWIKI)
    common = ["--model", "bert", "-i", text, "--tokenizer", vocab, "--dupe-factor", 3, "--num-shards", 3, "--quiet"]
    one = os.path.join(tmp, "t1")
    run(*common, "-o", one, "--threads", 1)
    two = os.path.join(tmp, "t2")
    run(*common, "-o", two, "--threads", 2)
    a, b = files_bytes(one, "train-*.hdf5"), files_bytes(two, "train-*.hdf5")
    if not a or a != b:
        fail("BERT shards differ between 1 and 2 threads")
    # A store past its resident budget is read through pread windows instead of the map: same bytes.
    windowed = os.path.join(tmp, "windowed")
    run(*common, "-o", windowed, "--threads", 2, "--store-budget-bytes", 1)
    if files_bytes(windowed, "train-*.hdf5") != a:
        fail("BERT shards differ when the token store is read through pread windows")
    m = manifest(one)
    sizes = [s["records"] for s in m["shards"]]
    if max(sizes) - min(sizes) > 1:
        fail(f"shard sizes not equal ±1: {sizes}")
    n = check_bert_records(one, 30522)
    s = m["stats"]
    print(f"bert: {n} instances in {len(sizes)} shards {sizes}; stats " +
          ", ".join(f"{k}={s[k]:.4f}" for k in ("masked_fraction", "mask_share", "kept_share", "random_share",
                                                "nsp_random_share", "nsp_coin_random_share", "short_target_share",
                                                "short_target_instance_share", "padding_share")))
    bounds = {"masked_fraction": (0.145, 0.155), "mask_share": (0.78, 0.82), "kept_share": (0.08, 0.12),
              "random_share": (0.08, 0.12), "nsp_coin_random_share": (0.48, 0.52),
              "short_target_share": (0.08, 0.12)}
    for k, (lo, hi) in bounds.items():
        if not lo <= s[k] <= hi:
            fail(f"statistic {k} = {s[k]:.4f} outside [{lo}, {hi}]")
    if s["instances"] != n:
        fail(f"manifest says {s['instances']} instances, shards hold {n}")

    # Another gzip level than the default (1): other bytes, the same records (h5py inflates them),
    # the level in the file.
    other = os.path.join(tmp, "level6")
    run(*common, "-o", other, "--compression-level", 6)
    for name in a:
        with h5py.File(os.path.join(one, name), "r") as f1, h5py.File(os.path.join(other, name), "r") as f6:
            for key in f1:
                if f1[key].compression_opts != 1:
                    fail(f"default level: {name}/{key} has {f1[key].compression} {f1[key].compression_opts}")
                if f6[key].compression != "gzip" or f6[key].compression_opts != 6:
                    fail(f"--compression-level 6: {name}/{key} has {f6[key].compression} {f6[key].compression_opts}")
                if not np.array_equal(f1[key][...], f6[key][...]):
                    fail(f"--compression-level 6: {name}/{key} differs from level 1's records")
    run(*common, "-o", os.path.join(tmp, "level10"), "--compression-level", 10, rc=2)

    # Interrupted after one shard (as a kill would leave it), then resumed: same bytes.
    cut = os.path.join(tmp, "cut")
    r = run(*common, "-o", cut, "--stop-after-shards", 1, rc=1)
    if manifest(cut)["complete"] or len(manifest(cut)["shards"]) != 1:
        fail("an interrupted run's manifest must list its one committed shard and say complete=false")
    run(*common, "-o", cut, "--resume")
    if files_bytes(cut, "train-*.hdf5") != a or not manifest(cut)["complete"]:
        fail("a resumed run differs from an uninterrupted one")
    if os.path.exists(os.path.join(cut, ".work")):
        fail("the work directory is left behind")
    binned_checks(common, one, tmp)


def rows(path):
    """Each record of a BERT shard, unpadded, as a hashable tuple."""
    with h5py.File(path, "r") as f:
        d = {k: f[k][...] for k in f}
    out = []
    for i in range(d["input_ids"].shape[0]):
        n = int(d["input_mask"][i].sum())
        out.append((tuple(d["input_ids"][i, :n]), tuple(d["segment_ids"][i, :n]), tuple(d["masked_lm_positions"][i]),
                    tuple(d["masked_lm_ids"][i]), int(d["next_sentence_labels"][i])))
    return out


def binned_checks(common, plain, tmp):
    """--bin-size 32 at seq 128 (LDDL's rule: 4 bins): every bin a plain NVIDIA shard set that h5py
    reads with the unbinned files' datasets and dtypes, padded to the bin's edge, each record in
    bin (n - 1) // 32; together the unbinned run's records; the same bytes at 1 and 2 threads."""
    out, out2 = os.path.join(tmp, "binned"), os.path.join(tmp, "binned2")
    run(*common, "-o", out, "--bin-size", 32, "--threads", 1)
    run(*common, "-o", out2, "--bin-size", 32, "--threads", 2)
    m = manifest(out)
    if m["format"] != "bert-hdf5-binned" or not m["complete"] or m["extra"]["bin_size"] != 32:
        fail(f"binned manifest: {m['format']} complete={m['complete']} {m['extra'].get('bin_size')}")
    with h5py.File(glob.glob(os.path.join(plain, "train-*.hdf5"))[0], "r") as f:
        layout = {k: f[k].dtype for k in f}
    binned_rows, counts = [], []
    for b in m["extra"]["bins"]:
        d = os.path.join(out, b["dir"])
        if files_bytes(d, "*.hdf5") != files_bytes(os.path.join(out2, b["dir"]), "*.hdf5"):
            fail(f"{b['dir']}: binned shards differ between 1 and 2 threads")
        check_bert_records(d, 30522)
        for path in sorted(glob.glob(os.path.join(d, "train-*.hdf5"))):
            with h5py.File(path, "r") as f:
                if {k: f[k].dtype for k in f} != layout or f["input_ids"].shape[1] != b["max_length"]:
                    fail(f"{path}: not the NVIDIA layout of the unbinned shards at length {b['max_length']}")
            for r in rows(path):
                if (len(r[0]) - 1) // 32 != b["bin"]:
                    fail(f"{path}: a record of {len(r[0])} tokens in bin {b['bin']}")
                binned_rows.append(r)
        counts.append(b["records"])
    plain_rows = [r for p in sorted(glob.glob(os.path.join(plain, "train-*.hdf5"))) for r in rows(p)]
    if sorted(plain_rows) != sorted(binned_rows) or sum(m["extra"]["bin_records"]) != len(plain_rows):
        fail("the bins do not hold exactly the unbinned run's records")
    cu.run_expecting(cu.tool("shard-tool"), "verify", out)
    print(f"bert --bin-size 32: records per bin {counts}, h5py reads each bin as NVIDIA's layout")


def tokenize_resume_checks(data, tmp):
    vocab = os.path.join(data, "vocab", "bert-base-uncased-vocab.txt")
    # The excerpt 12 times (~30 MB, ~12 batches of input): long enough to kill mid-tokenize.
    text = os.path.join(tmp, "big.jsonl")
    with open(os.path.join(data, ENWIKI), encoding="utf-8") as f:
        docs = [json.loads(line) for line in f]
    with open(text, "w", encoding="utf-8") as f:
        for r in range(12):
            for i, d in enumerate(docs):
                f.write(json.dumps({"id": f"{r}-{i}", "url": "", "title": d["title"], "text": d["text"]}) + "\n")
    common = ["--model", "bert", "-i", text, "--tokenizer", vocab, "--dupe-factor", 1, "--num-shards", 2,
              "--threads", 1, "--checkpoint-bytes", 1]
    whole = os.path.join(tmp, "tok-whole")
    run(*common, "-o", whole, "--quiet")
    # Killed as soon as the first checkpoint is on disk; a busy machine can let the run finish
    # tokenizing before the kill lands, so a few tries.
    for attempt in range(5):
        cut = os.path.join(tmp, f"tok-cut{attempt}")
        progress = os.path.join(cut, ".work", "store", "progress.json")
        p = subprocess.Popen([EXE, *map(str, common), "-o", cut, "--quiet"])
        while not os.path.exists(progress) and p.poll() is None:
            time.sleep(0.002)
        p.send_signal(signal.SIGKILL)
        p.wait()
        if not os.path.exists(os.path.join(cut, ".work", "store", "store.json")) and os.path.exists(progress):
            break
    else:
        fail("in 5 tries the kill never landed inside the tokenize stage (after its first checkpoint)")
    with open(progress) as f:
        done = json.load(f)["input_documents"]
    r = run(*common, "-o", cut, "--resume")
    if f"tokenizing from input document {done}" not in r.stderr or done == 0:
        fail(f"the resumed run did not continue from the checkpoint ({done} documents):\n{r.stderr}")
    if files_bytes(cut, "train-*.hdf5") != files_bytes(whole, "train-*.hdf5"):
        fail("a run killed while tokenizing and resumed differs from an uninterrupted one")
    print(f"tokenize: killed after a checkpoint at {done} of {12 * len(docs)} documents, resumed there, same bytes")


def gpt_checks(data, tmp):
    encoder = os.path.join(data, "vocab", "gpt2-encoder.json")
    text = os.path.join(data, ENWIKI)
    docs = sum(1 for line in open(text, encoding="utf-8") if json.loads(line)["text"].strip())
    for fmt in ("megatron", "llmc"):
        out = os.path.join(tmp, "gpt-" + fmt)
        run("--model", "gpt", "-i", text, "--tokenizer", encoder, "-o", out, "--format", fmt, "--num-shards", 2,
            "--valid-fraction", 0.05, "--quiet")
        total_docs, eods = 0, 0
        for split in (out, os.path.join(out, "valid")):
            m = manifest(split)
            for shard in m["shards"]:
                path = os.path.join(split, shard["file"])
                if fmt == "megatron":
                    idx = open(path[:-4] + ".idx", "rb").read()
                    count = int(np.frombuffer(idx, np.uint64, 1, 9 + 8 + 1)[0])  # "MMIDIDX\0\0", version, dtype
                    lengths = np.frombuffer(idx, np.int32, count, 9 + 8 + 1 + 16)
                    tokens = np.fromfile(path, np.uint16)
                    if lengths.sum() != len(tokens):
                        fail(f"{path}: index lengths do not add up to the .bin")
                    ends = np.cumsum(lengths) - 1
                    eods += int((tokens[ends] == 50256).sum())
                    total_docs += count
                else:
                    header = np.fromfile(path, np.int32, 256)
                    tokens = np.fromfile(path, np.uint16, offset=1024)
                    if header[0] != 20240520 or header[2] != len(tokens):
                        fail(f"{path}: not an llm.c gpt-2 shard")
                    eods += int((tokens == 50256).sum())
                    total_docs += int((tokens == 50256).sum())
        if total_docs != docs or eods != docs:
            fail(f"gpt {fmt}: {total_docs} documents and {eods} EOD tokens, expected {docs}")
        print(f"gpt {fmt}: {docs} documents, each once and ending in EOD, train + valid")


def repeated(data, tmp, copies):
    """The excerpt `copies` times over as JSON lines, each copy with new ids."""
    text = os.path.join(tmp, f"x{copies}.jsonl")
    if os.path.exists(text):
        return text
    with open(os.path.join(data, ENWIKI), encoding="utf-8") as f:
        docs = [json.loads(line) for line in f]
    with open(text, "w", encoding="utf-8") as f:
        for r in range(copies):
            for i, d in enumerate(docs):
                f.write(json.dumps({"id": f"{r}-{i}", "url": "", "title": d["title"], "text": d["text"]}) + "\n")
    return text


def output_only(out):
    """files_bytes of every file under out but the work files, manifests without their statistics."""
    got = {}
    for root, dirs, names in os.walk(out):
        dirs[:] = [d for d in dirs if d != ".work"]
        for name in names:
            path = os.path.join(root, name)
            data = open(path, "rb").read()
            if name == "manifest.json":
                m = json.loads(data)
                m.pop("stats", None)
                m.get("created_by", {}).pop("args", None)
                data = json.dumps(m, sort_keys=True).encode()
            got[os.path.relpath(path, out)] = data
    return got


def work_files_checks(data, tmp):
    """--keep-work gives the same output; failing at each stage boundary, then --resume, too."""
    vocab = os.path.join(data, "vocab", "bert-base-uncased-vocab.txt")
    text = os.path.join(data, ENWIKI)
    runs = {
        "bert": ["--model", "bert", "-i", text, "--tokenizer", vocab, "--dupe-factor", 2, "--num-shards", 4,
                 "--valid-fraction", 0.1, "--quiet"],
        "gpt": ["--model", "gpt", "-i", text, "--tokenizer", os.path.join(data, "vocab", "gpt2-encoder.json"),
                "--num-shards", 3, "--valid-fraction", 0.1, "--move-chunk-bytes", 200000, "--quiet"],
    }
    faults = {"bert": ["tokenized", "instances", "store-freed", "shards"],
              "gpt": ["tokenized", "gpt-spread-chunk", "store-freed", "shards"]}
    for model, args in runs.items():
        ref = os.path.join(tmp, f"work-{model}")
        run(*args, "-o", ref)
        want = output_only(ref)
        if os.path.exists(os.path.join(ref, ".work")):
            fail(f"{model}: the work directory is left behind")
        kept = os.path.join(tmp, f"work-{model}-kept")
        run(*args, "-o", kept, "--keep-work")
        if output_only(kept) != want:
            fail(f"{model}: --keep-work changes the output")
        for fault in faults[model]:
            out = os.path.join(tmp, f"work-{model}-{fault}")
            if fault == "shards":
                run(*args, "-o", out, "--stop-after-shards", 2, rc=1)
            else:
                p = subprocess.run([EXE, *map(str, args), "-o", out], capture_output=True, text=True,
                                   env=dict(os.environ, PRETRAIN_FAULT=f"0:{fault}"))
                if p.returncode != 1 or "fault injected" not in p.stderr:
                    fail(f"{model}: PRETRAIN_FAULT=0:{fault} did not end the run: exit {p.returncode} {p.stderr[-300:]}")
            run(*args, "-o", out, "--resume")
            if output_only(out) != want:
                fail(f"{model}: failed at {fault}, resumed: not the uninterrupted output")
            if os.path.exists(os.path.join(out, ".work")):
                fail(f"{model}: failed at {fault}, resumed: the work directory is left behind")
    print("work files: --keep-work gives the same output; failed at each stage boundary, resumed: the same bytes")


def disk_used(root):
    """Bytes of disk (allocated blocks) under root, as du counts them."""
    total = 0
    for d, _, names in os.walk(root):
        for n in names:
            try:
                total += os.lstat(os.path.join(d, n)).st_blocks * 512
            except OSError:
                pass  # removed while we looked
    return total


def peak_disk(args, out):
    """Runs the tool polling the disk its output directory takes: (peak, output at the end
    without the work files)."""
    peak = [0]
    p = subprocess.Popen([EXE, *map(str, args), "-o", out], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)

    def poll():
        while p.poll() is None:
            peak[0] = max(peak[0], disk_used(out))
            time.sleep(0.005)
    t = threading.Thread(target=poll)
    t.start()
    _, err = p.communicate()
    t.join()
    if p.returncode != 0:
        fail(f"{' '.join(map(str, args))}: exit {p.returncode}: {err[-500:]}")
    return max(peak[0], disk_used(out)), disk_used(out) - disk_used(os.path.join(out, ".work"))


def disk_bound_checks(data, tmp):
    """The disk at its peak holds at most 1.5x the output: the work files go as the stages after
    them are done (BERT: the store once the instances are made, a spill bucket once its shards are
    committed; GPT: the store as it is spread, a bucket once its shard is written). The control,
    --keep-work, is what every run did before: the store, the buckets and the shards at once."""
    vocab = os.path.join(data, "vocab", "bert-base-uncased-vocab.txt")
    text = repeated(data, tmp, 4)
    runs = {
        "bert seq 128 dupe 5": ["--model", "bert", "-i", text, "--tokenizer", vocab, "--seq-len", 128,
                                "--dupe-factor", 5, "--num-shards", 16, "--quiet"],
        "gpt": ["--model", "gpt", "-i", text, "--tokenizer", os.path.join(data, "vocab", "gpt2-encoder.json"),
                "--num-shards", 16, "--move-chunk-bytes", 1 << 20, "--quiet"],
    }
    for name, args in runs.items():
        out = os.path.join(tmp, "disk-" + name.split()[0])
        peak, output = peak_disk(args, out)
        shutil.rmtree(out)
        kept_peak, _ = peak_disk([*args, "--keep-work"], out + "-kept")
        shutil.rmtree(out + "-kept")
        print(f"{name}: peak disk {peak / 1e6:.1f} MB for {output / 1e6:.1f} MB of output ({peak / output:.2f}x); "
              f"with --keep-work {kept_peak / 1e6:.1f} MB ({kept_peak / output:.2f}x)")
        if peak > 1.5 * output:
            fail(f"{name}: the disk held {peak / output:.2f}x the output at its peak, more than 1.5x")
        if kept_peak < 1.9 * output:
            fail(f"{name}: the control (--keep-work) peaked at only {kept_peak / output:.2f}x the output: "
                 "the polling missed the peak, so the bound proves nothing")


def bad_input(tmp):
    vocab = os.path.join(tmp, "no-mask-vocab.txt")
    with open(vocab, "w") as f:
        f.write("[PAD]\n[UNK]\n[CLS]\n[SEP]\nthe\n")
    out = os.path.join(tmp, "bad1")
    r = run("-i", SAMPLE, "--tokenizer", vocab, "-o", out, rc=1)
    if "no-mask-vocab.txt" not in r.stderr or "[MASK]" not in r.stderr:
        fail(f"a vocabulary without [MASK] is not named: {r.stderr}")
    corrupt = os.path.join(tmp, "corrupt.jsonl")
    with open(corrupt, "w") as f:
        f.write('{"text": "fine."}\n{"text": broken\n')
    data = cu.shared_data()
    real_vocab = os.path.join(data, "vocab", "bert-base-uncased-vocab.txt") if data else None
    if real_vocab:
        out = os.path.join(tmp, "bad2")
        r = run("-i", corrupt, "--tokenizer", real_vocab, "-o", out, rc=1)
        if "corrupt.jsonl" not in r.stderr:
            fail(f"a corrupt input is not named: {r.stderr}")
        if glob.glob(os.path.join(out, "*.hdf5")):
            fail("a failed run left a shard")
    print("bad input: clear errors, exit 1, no shards")


def main():
    for flag in ("--help", "--version"):
        run(flag)
    run(rc=2)
    data = cu.shared_data()
    with cu.tempdir() as tmp:
        bad_input(tmp)
        if not data:
            cu.skip("shared data not found: only the CLI and bad-input checks ran")
        bert_checks(data, tmp)
        tokenize_resume_checks(data, tmp)
        gpt_checks(data, tmp)
        work_files_checks(data, tmp)
        disk_bound_checks(data, tmp)


if __name__ == "__main__":
    main()
