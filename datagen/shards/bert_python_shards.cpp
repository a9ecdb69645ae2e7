#include "datagen/shards/bert_python_shards.h"

#include <numeric>
#include <string>

#include "common/counter_rng.h"
#include "common/log.h"
#include "datagen/shards/bert_shard_filler.h"
#include "datagen/shards/bert_spill_record.h"
#include "datagen/shards/length_bins.h"
#include "datagen/shards/packing.h"
#include "datagen/shards/rng_streams.h"

namespace pretrain {

namespace {

// Every instance as a spill record, in the order they were made: compact (u16 ids for BERT's
// vocabularies) and one allocation, where a BertInstance each held four vectors. The rows and
// statistics then come from the same records as on the parallel path.
struct MadeInstances {
  std::string records;
  std::vector<size_t> offsets;       // of each record in `records`
  std::vector<uint16_t> tokens;      // each record's length, for the bins and the packer
  std::vector<uint8_t> predictions;  // each record's prediction count, for the packer

  void add(const BertInstance& instance) {
    offsets.push_back(records.size());
    tokens.push_back(uint16_t(instance.tokens.size()));
    predictions.push_back(uint8_t(instance.masked_lm_positions.size()));
    append_spill_record(instance, records);
  }
  SpillRecord record(uint32_t k) const {
    return SpillRecord(records.data() + offsets[k], records.size() - offsets[k], "(memory)", offsets[k]);
  }
};

// --pack: every instance packed (the whole corpus is the window, as it is in memory anyway) and
// the packs written in a seeded order, one row each.
void write_packs(const BertPythonOptions& o, const MadeInstances& made, const std::vector<uint32_t>& order,
                 BertSplitWriter& writer, MakeShardsStats& stats) {
  std::vector<PackItem> items;
  items.reserve(order.size());
  for (uint32_t k : order) items.push_back({made.tokens[k], made.predictions[k]});
  const Packs packs = pack_first_fit_decreasing(items, {.seq_len = uint32_t(o.instances.seq_len),
                                                        .max_predictions = uint32_t(o.instances.max_predictions),
                                                        .max_pack = uint32_t(o.max_pack)});
  std::vector<uint32_t> pack_order(packs.size());
  std::iota(pack_order.begin(), pack_order.end(), 0u);
  CounterRng rng(o.seed, 0, kPackStream);
  rng.shuffle(pack_order);
  stats.packed_rows = packs.size();
  writer.begin_bin(0, packs.size());
  std::vector<SpillRecord> pack;
  for (uint32_t p : pack_order) {
    pack.clear();
    for (uint32_t item : packs[p]) pack.push_back(made.record(order[item]));
    writer.add_pack(pack);
  }
  writer.end_bin();
}

}  // namespace

void write_bert_python_shards(const BertPythonOptions& o, const BertMaskVocab& vocab, const TokenStore& store,
                              const SplitOutput& output, MakeShardsStats& stats) {
  o.check();
  output.check();
  if (output.valid) throw UsageError("--rng python reproduces the Python script, which has no valid split");
  log_info("--rng python: building instances sequentially, as create_pretraining_data.py does");
  const StageClock instances_clock;
  MadeInstances made;
  // Room for 3 bytes per corpus token and pass (narrow ids, positions, headers: 2.4 measured on
  // enwiki at seq 128), so that the buffer is not copied as it grows; pages never written cost
  // nothing.
  made.records.reserve(size_t(double(store.num_tokens()) * o.dupe_factor * 3.0) + 4096);
  const std::vector<uint32_t> order =
      create_training_instances_python(store, o.instances, vocab, o.dupe_factor, int64_t(o.seed),
                                       [&made](BertInstance& instance) { made.add(instance); });
  instances_clock.add_to(stats.instances_seconds, stats.instances_cpu_seconds);
  const StageClock write_clock;
  stats.instances = order.size();
  stats.train_documents = store.num_documents();
  const BertShardFillerOptions filler_options{.seq_len = o.instances.seq_len,
                                              .max_predictions = o.instances.max_predictions,
                                              .compression_level = o.compression_level,
                                              .mask_id = vocab.mask,
                                              .max_pack = o.max_pack};
  const LengthBins bins = length_bins(o);
  BertSplitWriter writer(output, bins, filler_options, stats);
  if (o.max_pack > 0) {
    write_packs(o, made, order, writer, stats);
  } else {
    // With length bins, each bin's instances in the script's order, bin by bin.
    std::vector<std::vector<uint32_t>> by_bin(size_t(bins.count()));
    for (uint32_t k : order) by_bin[size_t(bins.bin_of(made.tokens[k]))].push_back(k);
    for (int bin = 0; bin < bins.count(); ++bin) {
      writer.begin_bin(bin, by_bin[size_t(bin)].size());
      for (uint32_t k : by_bin[size_t(bin)]) writer.add(made.record(k));
      writer.end_bin();
    }
  }
  write_clock.add_to(stats.write_seconds, stats.write_cpu_seconds);
  writer.finish(stats.to_json(o.instances.seq_len));
}

}  // namespace pretrain
