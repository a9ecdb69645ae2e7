"""shard-tool stats end to end on demo-like shards of the bundled sample (compat_util.sample_shards:
its documents imported into document shards, a WordPiece vocabulary → BERT seq 64, a SentencePiece
model → GPT Megatron; here also the same BERT instances --bin-size 16 and --pack, and llm.c):

- documents: the sentences counted are the ones make-pretraining-shards tokenized (its manifest),
  a dedup report gives the duplicated share;
- BERT plain, binned and packed hold the same instances: the same length histogram, and padding
  cases equal to scripts/bench/padding.py's on the same shards (its functions, imported);
- GPT: every token counted, bytes per token from the SentencePiece model near the documents' bytes
  per token; llm.c counts the same documents;
- --format json prints what --json writes, the same at --threads 1 and 2;
- scripts/plot_stats.py writes a PNG for every kind;
- a damaged shard exits 1 naming it; a --bin-size that does not divide seq_len exits 2.
"""
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "compat"))
import compat_util as cu  # noqa: E402

SOURCE = os.environ["PRETRAIN_SOURCE_DIR"]
sys.path.insert(0, os.path.join(SOURCE, "scripts", "bench"))
import padding  # noqa: E402  scripts/bench/padding.py: the reference

TOOL = cu.tool("shard-tool")
failures = []


def check(ok, message):
    if not ok:
        failures.append(message)


def stats(target, *flags, rc=0):
    r = cu.run_expecting(TOOL, "-q", "stats", target, "--format", "json", *flags, rc=rc)
    return json.loads(r.stdout) if rc == 0 else r


def untimed(s):
    return {k: v for k, v in s.items() if k not in ("seconds", "setup_seconds", "rate", "threads")}


def plot(stats_json, png):
    r = subprocess.run([sys.executable, os.path.join(SOURCE, "scripts", "plot_stats.py"), stats_json, "-o", png],
                       capture_output=True, text=True, timeout=120)
    check(r.returncode == 0, f"plot_stats.py {stats_json}: exit {r.returncode}: {r.stderr}")
    if r.returncode == 0:
        with open(png, "rb") as f:
            check(f.read(8) == b"\x89PNG\r\n\x1a\n", f"{png} is not a PNG")


def padding_reference(shards, seq_len, bin_sizes, max_pack):
    """Tokens computed per case, as padding.py counts them on the same shards."""
    lengths, found_seq, _ = padding.lengths_of([shards])
    ref = {"unbinned": len(lengths) * seq_len}
    for b in bin_sizes:
        ref[f"bin{b}"] = padding.binned_tokens(lengths, seq_len, b)
    ref[f"packed{max_pack}"] = padding.packed_sequences(lengths, seq_len, max_pack) * seq_len
    return ref, int(lengths.sum())


def main():
    with cu.tempdir() as tmp:
        docs = os.path.join(tmp, "docs")
        cu.run(TOOL, "-q", "import-docs", cu.test_data("sample-docs.jsonl"), "-o", docs)
        sets = cu.sample_shards(tmp, docs=docs)
        bert, gpt = sets["bert"], sets["gpt"]
        make = cu.tool("make-pretraining-shards")
        vocab, spm = os.path.join(tmp, "wordpiece", "vocab.txt"), os.path.join(tmp, "spm", "spm.model")
        bert_args = ["-q", "--model", "bert", "-i", docs, "--tokenizer", vocab, "--seq-len", 64, "--max-predictions", 10,
                     "--dupe-factor", 5, "--num-shards", 2]
        binned, packed, llmc = (os.path.join(tmp, n) for n in ("binned", "packed", "llmc"))
        cu.run(make, *bert_args, "-o", binned, "--bin-size", 16)
        cu.run(make, *bert_args, "-o", packed, "--pack", "--max-pack", 3)
        cu.run(make, "-q", "--model", "gpt", "--format", "llmc", "-i", docs, "--tokenizer", spm, "-o", llmc)

        # Documents: the sentences make-pretraining-shards tokenized; a dedup report.
        d = stats(docs)
        bert_manifest = cu.read_manifest(bert)
        check(d["counts"]["documents"] == 6, f"documents: {d['counts']}")
        check(d["counts"]["sentences"] == bert_manifest["stats"]["sentences"],
              f"sentences {d['counts']['sentences']}, make-pretraining-shards tokenized {bert_manifest['stats']['sentences']}")
        check(d["histograms"]["document_sentences"]["sum"] == d["counts"]["sentences"], "sentence histogram sum")
        first_id = json.loads(open(cu.test_data("sample-docs.jsonl"), encoding="utf-8").readline())["id"]
        report = os.path.join(tmp, "removed.jsonl")
        with open(report, "w") as f:
            f.write(json.dumps({"id": first_id, "source": docs, "cluster": 0, "kept": "x"}) + "\n")
        dd = stats(docs, "--dedup-report", report)["dedup"]
        check(dd["basis"] == "input" and abs(dd["duplicated_share"] - 1 / 6) < 1e-12, f"dedup: {dd}")

        # BERT: the same instances in three layouts, padding as padding.py counts it.
        bins = ["--bin-size", 16, "--bin-size", 32]
        b, bb, bp = stats(bert, *bins), stats(binned, *bins), stats(packed, *bins)
        check((b["layout"], bb["layout"], bp["layout"]) == ("plain", "binned", "packed"), "layouts")
        for other in (bb, bp):
            check(other["histograms"]["instance_tokens"]["counts"] == b["histograms"]["instance_tokens"]["counts"],
                  f"{other['layout']}: another instance length histogram than the plain shards'")
            check(other["counts"]["real_tokens"] == b["counts"]["real_tokens"], f"{other['layout']}: real tokens")
        check(b["counts"]["documents"] == 6 and b["counts"]["instances"] == b["counts"]["rows"], f"bert counts {b['counts']}")
        check(b["tokenizer"]["unk_share"] is not None, "no [UNK] share for WordPiece shards")
        ref, real = padding_reference(bert, 64, [16, 32], 3)
        check(real == b["padding"]["real_tokens"], f"real tokens {b['padding']['real_tokens']}, padding.py {real}")
        cases = {c["case"]: c["tokens_computed"] for c in b["padding"]["cases"]}
        for case, tokens in ref.items():
            check(cases.get(case) == tokens, f"padding {case}: ours {cases.get(case)}, padding.py {tokens}")
        check(cases["stored"] == cases["unbinned"], "plain shards store the unbinned case")
        # Stored binned and packed: what padding.py counts of those shards (per bin, and rows · 64).
        stored_binned = sum(len(padding.lengths_of([os.path.join(binned, x["dir"])])[0]) * x["max_length"]
                            for x in cu.read_manifest(binned)["extra"]["bins"])
        check(bb["padding"]["cases"][0]["tokens_computed"] == stored_binned, "binned: stored tokens")
        check(bp["padding"]["cases"][0]["tokens_computed"] == bp["counts"]["rows"] * 64, "packed: stored tokens")
        rows_by_instances = bp["histograms"]["row_instances"]
        check(rows_by_instances["count"] == bp["counts"]["rows"] and rows_by_instances["sum"] == bp["counts"]["instances"],
              f"packed: instances per row {rows_by_instances}, counts {bp['counts']}")

        # GPT: every token, bytes per token near the documents' bytes per token.
        g = stats(gpt)
        gm = cu.read_manifest(gpt)
        check(g["counts"]["tokens"] == gm["stats"]["tokens"], f"GPT tokens {g['counts']['tokens']}, manifest {gm['stats']['tokens']}")
        check(g["counts"]["documents"] == gm["stats"]["documents"], "GPT documents")
        bpt, docs_bpt = g["tokenizer"]["bytes_per_token"], d["counts"]["text_bytes"] / g["counts"]["text_tokens"]
        check(bpt is not None and abs(bpt - docs_bpt) < 0.05 * docs_bpt, f"bytes per token {bpt}, documents' {docs_bpt:.3f}")
        lc = stats(llmc)
        check(lc["counts"]["documents"] == g["counts"]["documents"] and lc["counts"]["tokens"] == g["counts"]["tokens"],
              f"llm.c {lc['counts']}, Megatron {g['counts']}")

        # --json writes what --format json prints; the same at any --threads.
        out_json = os.path.join(tmp, "bert.json")
        cu.run(TOOL, "-q", "--threads", 1, "stats", bert, *bins, "--json", out_json)
        with open(out_json) as f:
            one = json.load(f)
        check(untimed(one) == untimed(b), "--json at --threads 1 differs from --format json at the default threads")
        for name, s in (("docs", d), ("bert", b), ("binned", bb), ("packed", bp), ("gpt", g), ("llmc", lc)):
            path = os.path.join(tmp, f"{name}.json")
            with open(path, "w") as f:
                json.dump(s, f)
            plot(path, os.path.join(tmp, f"{name}.png"))
        table = cu.run(TOOL, "-q", "stats", bert).stdout
        check("| --pack --max-pack 3 |" in table and "[UNK] share" in table, f"table: {table}")

        # Bad input.
        r = stats(bert, "--bin-size", 7, rc=2)
        check("--bin-size 7" in r.stderr, f"--bin-size 7: {r.stderr}")
        shard = os.path.join(bert, bert_manifest["shards"][0]["file"])
        with open(shard, "r+b") as f:
            f.seek(os.path.getsize(shard) // 2)
            byte = f.read(1)
            f.seek(-1, 1)
            f.write(bytes([byte[0] ^ 0xFF]))
        r = stats(bert, rc=1)
        check(shard in r.stderr and "xxh3" in r.stderr, f"damaged shard: {r.stderr}")
        r = stats(os.path.join(tmp, "wordpiece"), rc=1)
        check("manifest.json" in r.stderr, f"a directory without a manifest: {r.stderr}")
        # Shard files without their manifest: counted, without the tokenizer's figures; two kinds at once: exit 2.
        other = os.path.join(packed, cu.read_manifest(packed)["shards"][0]["file"])
        loose = stats(other)
        check(loose["layout"] == "packed" and loose["tokenizer"] is None, f"a loose packed shard: {loose.get('layout')}")
        r = cu.run_expecting(TOOL, "-q", "stats", other, os.path.join(gpt, gm["shards"][0]["file"]), rc=2)
        check("one kind at a time" in r.stderr, f"two kinds: {r.stderr}")
    cu.finish(failures)


if __name__ == "__main__":
    main()
