// Small BERT HDF5 shard sets for the loader's tests: `sizes[i]` records in shard-<i>.hdf5 (chunks of
// 8 records), record g made by the test's own `make_record(g)` (numbered across the shards, so a
// sample can say which record it came from), and the manifest make-pretraining-shards would write
// (with max_pack > 0, packed shards: the records must carry their packing fields); and a
// length-binned output (make-pretraining-shards --bin-size) made of such sets.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/file.h"
#include "common/manifest.h"
#include "formats/bert_hdf5.h"

namespace pretrain::testing {

struct BertShardFiles {
  std::vector<std::string> files;
  Manifest manifest;
};

inline BertShardFiles write_bert_shards(const std::string& dir, const std::vector<int64_t>& sizes, int64_t seq_len,
                                        int64_t max_predictions, std::map<std::string, int64_t> special_ids,
                                        const std::function<BertRecord(int64_t)>& make_record,
                                        int64_t max_pack = 0) {
  BertShardFiles out;
  Manifest& m = out.manifest;
  m.format = kFormatBertHdf5;
  m.seq_len = seq_len;
  m.max_predictions = max_predictions;
  m.tokenizer.kind = "wordpiece";
  m.tokenizer.vocab_size = 30522;
  m.tokenizer.vocab_hash = "0123456789abcdef";
  m.tokenizer.special_ids = std::move(special_ids);
  if (max_pack > 0) m.extra["max_pack"] = max_pack;
  int64_t g = 0;
  for (size_t i = 0; i < sizes.size(); ++i) {
    const std::string name = "shard-" + std::to_string(i) + ".hdf5";
    BertShardOptions o;
    o.records_per_chunk = 8;
    o.max_pack = max_pack;
    BertShardWriter w(path_join(dir, name), seq_len, max_predictions, o);
    for (int64_t k = 0; k < sizes[i]; ++k) w.append(make_record(g++));
    w.commit();
    out.files.push_back(path_join(dir, name));
    m.shards.push_back(Manifest::describe(dir, name, uint64_t(sizes[i])));
  }
  return out;
}

// A make-pretraining-shards --bin-size output in `dir`: bin i, in bin-0<i>/, holds counts[i] records
// of length lengths[i] (record g made by make_record(g, length), numbered across the bins) in two
// shards with their manifest; the split's manifest lists the bins.
inline void write_binned_bert_shards(const std::string& dir, const std::vector<int64_t>& lengths,
                                     const std::vector<int64_t>& counts, int64_t max_predictions,
                                     const std::map<std::string, int64_t>& special_ids,
                                     const std::function<BertRecord(int64_t, int64_t)>& make_record) {
  Manifest split;
  split.format = kFormatBertHdf5Binned;
  split.seq_len = lengths.back();
  split.max_predictions = max_predictions;
  nlohmann::json bins = nlohmann::json::array();
  int64_t first = 0;
  for (size_t i = 0; i < lengths.size(); ++i) {
    const std::string name = "bin-0" + std::to_string(i), sub = path_join(dir, name);
    make_dirs(sub);
    const int64_t length = lengths[i], base = first;
    auto written = write_bert_shards(sub, {counts[i] / 2, counts[i] - counts[i] / 2}, length, max_predictions, special_ids,
                                     [&](int64_t g) { return make_record(base + g, length); });
    written.manifest.write(path_join(sub, kManifestName));
    bins.push_back({{"dir", name}, {"bin", i}, {"max_length", length}, {"records", counts[i]}, {"shards", 2}});
    first += counts[i];
  }
  split.extra["bin_size"] = 8;
  split.extra["bins"] = bins;
  split.write(path_join(dir, kManifestName));
}

}  // namespace pretrain::testing
