#!/usr/bin/env python3
"""train-tokenizer against the references, on botchan.txt + the enwiki sample's text:

WordPiece vs HF tokenizers' BertWordPieceTokenizer.train (+ save_model), vocab sizes 1000 and 5000,
lowercased and cased. HF's result is not deterministic: the "##x" forms get their ids in the order
words come out of a randomly seeded Rust HashMap, and those ids break ties between equally frequent
pairs, so two HF runs can differ (on botchan alone, vocab 1000: 1-2 entries). We use code point
order instead. So:
  - replay: train_wordpiece_replay (our trainer, given the "##x" order of this HF run) must give
    HF's vocab.txt exactly, line for line;
  - train-tokenizer: special tokens and alphabet line for line, the same "##x" set, and at most
    0.5% of entries different from this HF run (printed; 0 on this text when written);
  - on every shared text with vocab 30000 (more characters than limit_alphabet, whose ties HF also
    breaks in HashMap order) the replay, given HF's alphabet too, must give HF's vocab.txt exactly;
  - train-tokenizer reading the wikiextractor JSON lines directly gives what it gives on the
    extracted text; --threads 1 and 2 give the same bytes; the vocabulary loads with tokenize.
SentencePiece (unigram and bpe) vs spm_train on the same files with its default --num_threads=16:
the same spm.vocab; --threads 1 and 2 give the same spm.model bytes; tokenize with the trained
model equals spm_encode with it."""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compat_util as cu  # noqa: E402

cu.require_venv_modules("tokenizers")
import tokenizers  # noqa: E402

SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
ENWIKI = "wikipedia/enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.wikiextractor.jsonl"


def hf_train(files, vocab_size, lowercase, out_dir):
    tok = tokenizers.BertWordPieceTokenizer(lowercase=lowercase)
    tok.train(files, vocab_size=vocab_size, min_frequency=2, limit_alphabet=1000, special_tokens=SPECIALS,
              wordpieces_prefix="##", show_progress=False)
    os.makedirs(out_dir, exist_ok=True)
    tok.save_model(out_dir)
    return read_lines(os.path.join(out_dir, "vocab.txt"))


def read_lines(path):
    with open(path, encoding="utf-8") as f:
        return f.read().split("\n")[:-1]


def blocks(vocab):
    """(specials and alphabet, the "##x" set, the rest) of a vocab.txt."""
    alphabet_end = len(SPECIALS)
    while alphabet_end < len(vocab) and len(vocab[alphabet_end]) == 1:
        alphabet_end += 1
    k = alphabet_end
    while k < len(vocab) and vocab[k].startswith("##") and len(vocab[k]) == 3:
        k += 1
    return vocab[:alphabet_end], set(vocab[alphabet_end:k]), vocab[k:]


def check_wordpiece(tmp, files, jsonl, failures):
    train = cu.tool("train-tokenizer")
    replay = cu.tool("train_wordpiece_replay")
    for lowercase in (True, False):
        for n in (1000, 5000):
            name = f"wordpiece {'uncased' if lowercase else 'cased'} {n}"
            hf = hf_train(files, n, lowercase, os.path.join(tmp, f"hf-{lowercase}-{n}"))
            hf_vocab = os.path.join(tmp, f"hf-{lowercase}-{n}", "vocab.txt")
            replayed = cu.run(replay, n, "lowercase" if lowercase else "cased", hf_vocab, *files).stdout.split("\n")[:-1]
            if replayed != hf:
                bad = [i for i in range(min(len(hf), len(replayed))) if hf[i] != replayed[i]]
                failures.append(f"{name}: replay differs from HF ({len(replayed)} vs {len(hf)} entries, "
                                f"first at line {bad[0] + 1 if bad else min(len(hf), len(replayed)) + 1})")
            case = "--lowercase" if lowercase else "--no-lowercase"
            outs = {}
            for label, inputs, threads in (("text", files, 1), ("text", files, 2), ("jsonl", [files[0], jsonl], 2)):
                out = os.path.join(tmp, f"ours-{lowercase}-{n}-{label}-{threads}")
                cu.run(train, "--kind", "wordpiece", "--vocab-size", n, case, "-o", out, "--threads", threads,
                       "--quiet", *inputs)
                with open(os.path.join(out, "vocab.txt"), "rb") as f:
                    outs[(label, threads)] = f.read()
            if outs[("text", 1)] != outs[("text", 2)]:
                failures.append(f"{name}: --threads 1 and 2 differ")
            if outs[("text", 1)] != outs[("jsonl", 2)]:
                failures.append(f"{name}: the JSON lines input gives another vocabulary than its text")
            ours = outs[("text", 1)].decode("utf-8").split("\n")[:-1]
            (ours_head, ours_cont, _), (hf_head, hf_cont, _) = blocks(ours), blocks(hf)
            differing = len(set(ours) - set(hf))
            print(f"{name}: {len(ours)} entries (HF {len(hf)}), {len(hf_head) - len(SPECIALS)} alphabet, "
                  f"{len(hf_cont)} ##-characters, {differing} entries not in HF's; replay "
                  f"{'identical' if replayed == hf else 'DIFFERENT'}")
            if len(ours) != len(hf) or ours_head != hf_head or ours_cont != hf_cont or differing > len(hf) // 200:
                failures.append(f"{name}: vocabulary differs from HF's beyond tie order ({differing} entries)")
            out = os.path.join(tmp, f"ours-{lowercase}-{n}-text-1")
            r = cu.run(cu.tool("tokenize"), "--tokenizer", os.path.join(out, "vocab.txt"), "--quiet", "-i", files[0],
                       check=False)
            if r.returncode != 0:
                if "not built yet" in r.stderr:
                    print("  (tokenize cannot read vocab.txt yet: WordPiece is not built)")
                else:
                    failures.append(f"{name}: tokenize cannot use the trained vocab.txt: {r.stderr.strip()}")


def check_wordpiece_all_texts(tmp, data, failures):
    """Every shared text (en, el, bg, ja …), vocab 30000: more than limit_alphabet characters, so HF
    drops some of equal count in HashMap order; the replay keeps HF's alphabet and must give HF's
    vocab.txt exactly."""
    import bz2
    import glob
    text = os.path.join(tmp, "all.txt")
    with open(text, "w", encoding="utf-8") as out:
        for path in sorted(glob.glob(os.path.join(data, "wikipedia", "*.wikiextractor.jsonl*"))):
            opener = bz2.open if path.endswith(".bz2") else open
            with opener(path, "rt", encoding="utf-8") as f:
                for record in f:
                    if record.strip():
                        out.write(json.loads(record)["text"] + "\n")
        for name in ("botchan.txt", "bert-sample_text.txt"):
            with open(os.path.join(data, "vocab", name), encoding="utf-8") as f:
                out.write(f.read())
    hf = hf_train([text], 30000, True, os.path.join(tmp, "hf-all"))
    replayed = cu.run(cu.tool("train_wordpiece_replay"), 30000, "lowercase", os.path.join(tmp, "hf-all", "vocab.txt"),
                      text).stdout.split("\n")[:-1]
    out = os.path.join(tmp, "ours-all")
    cu.run(cu.tool("train-tokenizer"), "--kind", "wordpiece", "--vocab-size", 30000, "-o", out, "--quiet", text)
    ours = read_lines(os.path.join(out, "vocab.txt"))
    differing = len(set(ours) - set(hf))
    print(f"wordpiece all texts 30000: {len(ours)} entries (HF {len(hf)}), {differing} entries not in HF's; replay "
          f"{'identical' if replayed == hf else 'DIFFERENT'}")
    if replayed != hf:
        failures.append("wordpiece all texts 30000: replay differs from HF")
    if len(ours) != len(hf) or differing > len(hf) // 200:
        failures.append(f"wordpiece all texts 30000: {differing} entries not in HF's")


def check_sentencepiece(tmp, files, failures):
    if not os.path.exists("/usr/bin/spm_train"):
        print("spm_train not installed: SentencePiece part skipped")
        return
    train = cu.tool("train-tokenizer")
    for model_type in ("unigram", "bpe"):
        name = f"sentencepiece {model_type} 1000"
        models = {}
        for threads in (1, 2):
            out = os.path.join(tmp, f"spm-{model_type}-{threads}")
            cu.run(train, "--kind", "sentencepiece", "--model-type", model_type, "--vocab-size", 1000, "-o", out,
                   "--threads", threads, "--quiet", *files)
            with open(os.path.join(out, "spm.model"), "rb") as f:
                models[threads] = f.read()
        if models[1] != models[2]:
            failures.append(f"{name}: --threads 1 and 2 give different models")
        prefix = os.path.join(tmp, f"ref-{model_type}")
        cu.run("/usr/bin/spm_train", f"--input={','.join(files)}", f"--model_prefix={prefix}", "--vocab_size=1000",
               f"--model_type={model_type}", "--minloglevel=2")
        ours_vocab = read_lines(os.path.join(tmp, f"spm-{model_type}-1", "spm.vocab"))
        ref_vocab = read_lines(prefix + ".vocab")
        differing = sum(a != b for a, b in zip(ours_vocab, ref_vocab)) + abs(len(ours_vocab) - len(ref_vocab))
        model = os.path.join(tmp, f"spm-{model_type}-1", "spm.model")
        ours_ids = cu.run(cu.tool("tokenize"), "--tokenizer", model, "--quiet", "-i", files[0]).stdout
        ref_ids = cu.run("/usr/bin/spm_encode", "--model", model, "--output_format=id", "--input", files[0]).stdout
        print(f"{name}: {len(ours_vocab)} pieces, {differing} lines differ from spm_train's .vocab; "
              f"tokenize {'equals' if ours_ids == ref_ids else 'DIFFERS from'} spm_encode")
        if differing:
            failures.append(f"{name}: spm.vocab differs from spm_train's in {differing} lines")
        if ours_ids != ref_ids:
            failures.append(f"{name}: tokenize with the trained model differs from spm_encode")


def main():
    data = cu.shared_data()
    if not data:
        cu.skip("shared data not found")
    failures = []
    with cu.tempdir() as tmp:
        jsonl = os.path.join(data, ENWIKI)
        enwiki = os.path.join(tmp, "enwiki.txt")  # one paragraph a line, as train-tokenizer reads documents
        with open(jsonl, encoding="utf-8") as f, open(enwiki, "w", encoding="utf-8") as out:
            for record in f:
                if record.strip():
                    out.write(json.loads(record)["text"] + "\n")
        files = [os.path.join(data, "vocab", "botchan.txt"), enwiki]
        check_wordpiece(tmp, files, jsonl, failures)
        check_wordpiece_all_texts(tmp, data, failures)
        check_sentencepiece(tmp, files, failures)
    if failures:
        sys.exit("FAIL:\n  " + "\n  ".join(failures))
    print("OK")


if __name__ == "__main__":
    main()
