"""The peer of scripts/bench/shards.sh: Google's create_pretraining_data.py algorithm as the field
runs it, in Python (our own transcription, no TensorFlow), with HF's fast tokenizer doing the
tokenization (batched, so the peer is not held back by the slow Python tokenizer). Reads Google's
text format, builds dupe_factor passes of NSP + masked-LM instances, shuffles, and counts them.
Prints `RESULT bert_python <instances/s> <seconds> <instances> <tokens>`.
  shards_peer.py --text FILE --vocab VOCAB [--dupe N] [--seq-len 128] [--seed 12345]"""
import argparse
import random
import time

ap = argparse.ArgumentParser()
ap.add_argument("--text", required=True)
ap.add_argument("--vocab", required=True)
ap.add_argument("--dupe", type=int, default=1)
ap.add_argument("--seq-len", type=int, default=128)
ap.add_argument("--max-predictions", type=int, default=20)
ap.add_argument("--seed", type=int, default=12345)
a = ap.parse_args()

from transformers import BertTokenizerFast  # noqa: E402

t0 = time.perf_counter()
tok = BertTokenizerFast(a.vocab, do_lower_case=True)
docs, lines = [[]], []
with open(a.text, encoding="utf-8") as f:
    for line in f:
        line = line.strip()
        if not line:
            docs.append([])
        else:
            lines.append(line)
            docs[-1].append(len(lines) - 1)
ids = tok(lines, add_special_tokens=False)["input_ids"]
documents = [[ids[i] for i in d if ids[i]] for d in docs]
documents = [d for d in documents if d]
tokens = sum(len(s) for d in documents for s in d)
rng = random.Random(a.seed)
rng.shuffle(documents)
vocab_size = tok.vocab_size
CLS, SEP, MASK = tok.cls_token_id, tok.sep_token_id, tok.mask_token_id


def mask(tokens):
    cand = [i for i, t in enumerate(tokens) if t not in (CLS, SEP)]
    rng.shuffle(cand)
    n = min(a.max_predictions, max(1, int(round(len(tokens) * 0.15))))
    out, lms = list(tokens), []
    for i in cand[:n]:
        if rng.random() < 0.8:
            out[i] = MASK
        elif rng.random() >= 0.5:
            out[i] = rng.randint(0, vocab_size - 1)
        lms.append((i, tokens[i]))
    return out, sorted(lms)


def instances_of(index):
    doc = documents[index]
    max_tokens = a.seq_len - 3
    target = rng.randint(2, max_tokens) if rng.random() < 0.1 else max_tokens
    out, chunk, length, i = [], [], 0, 0
    while i < len(doc):
        chunk.append(doc[i])
        length += len(doc[i])
        if i == len(doc) - 1 or length >= target:
            a_end = rng.randint(1, len(chunk) - 1) if len(chunk) >= 2 else 1
            ta = [t for s in chunk[:a_end] for t in s]
            tb = []
            if len(chunk) == 1 or rng.random() < 0.5:
                for _ in range(10):
                    r = rng.randint(0, len(documents) - 1)
                    if r != index:
                        break
                rdoc = documents[r]
                for j in range(rng.randint(0, len(rdoc) - 1), len(rdoc)):
                    tb.extend(rdoc[j])
                    if len(tb) >= target - len(ta):
                        break
                i -= len(chunk) - a_end
            else:
                tb = [t for s in chunk[a_end:] for t in s]
            while len(ta) + len(tb) > max_tokens:
                t = ta if len(ta) > len(tb) else tb
                if rng.random() < 0.5:
                    del t[0]
                else:
                    t.pop()
            out.append(mask([CLS] + ta + [SEP] + tb + [SEP]))
            chunk, length = [], 0
        i += 1
    return out


instances = []
for _ in range(a.dupe):
    for d in range(len(documents)):
        instances.extend(instances_of(d))
rng.shuffle(instances)
secs = time.perf_counter() - t0
print(f"RESULT bert_python {len(instances) / secs:.1f} {secs:.3f} {len(instances)} {tokens}")
