// Inputs for the make-pretraining-shards stage tests: a toy BERT vocabulary, a token store of
// random documents (also returned in memory, for comparing with the instance algorithm), and
// where a stage writes.
#pragma once
#include <random>
#include <string>
#include <vector>

#include "common/file.h"
#include "datagen/shards/bert_instances.h"
#include "datagen/shards/shard_series.h"
#include "datagen/shards/token_store.h"

namespace pretrain::testing {

// [PAD] [UNK] [CLS] [SEP] [MASK] (ids 0–4), then the words w0…w29 (ids 5–34).
inline BertMaskVocab toy_bert_vocab() {
  std::vector<std::string> entries = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"};
  for (int i = 0; i < 30; ++i) entries.push_back("w" + std::to_string(i));
  return make_bert_mask_vocab(entries, "toy");
}

// A committed store in `dir` of `docs` documents of 1–6 sentences of 3–10 word ids.
inline InMemoryCorpus write_random_store(const std::string& dir, int docs, uint32_t seed) {
  InMemoryCorpus corpus;
  make_dirs(dir);
  TokenStoreWriter w(dir);
  std::mt19937 gen(seed);
  for (int d = 0; d < docs; ++d) {
    std::vector<std::vector<TokenId32>> doc(1 + gen() % 6);
    for (auto& s : doc) {
      s.resize(3 + gen() % 8);
      for (auto& t : s) t = TokenId32(5 + gen() % 30);
    }
    w.add_document(doc);
    corpus.documents.push_back(doc);
  }
  w.commit({{"test", 1}});
  return corpus;
}

// A fresh training split of `num_shards` shards into `dir`, keyed "k".
inline SplitOutput split_output(const std::string& dir, int num_shards) {
  SplitOutput out;
  out.dir = dir;
  out.num_shards = num_shards;
  out.manifest.extra["key"] = "k";
  return out;
}

}  // namespace pretrain::testing
