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

// --pack: every instance packed (the whole corpus is the window, as it is in memory anyway) and
// the packs written in a seeded order, one row each.
void write_packs(const BertPythonOptions& o, const std::vector<BertInstance>& instances, BertSplitWriter& writer,
                 MakeShardsStats& stats) {
  std::vector<PackItem> items;
  items.reserve(instances.size());
  for (const BertInstance& inst : instances)
    items.push_back({uint32_t(inst.tokens.size()), uint32_t(inst.masked_lm_positions.size())});
  const Packs packs = pack_first_fit_decreasing(items, {.seq_len = uint32_t(o.instances.seq_len),
                                                        .max_predictions = uint32_t(o.instances.max_predictions),
                                                        .max_pack = uint32_t(o.max_pack)});
  std::vector<uint32_t> order(packs.size());
  std::iota(order.begin(), order.end(), 0u);
  CounterRng rng(o.seed, 0, kPackStream);
  rng.shuffle(order);
  stats.packed_rows = packs.size();
  writer.begin_bin(0, packs.size());
  std::string buffer;  // the pack's instances as spill records: rows and statistics from one place
  std::vector<size_t> starts;
  std::vector<SpillRecord> pack;
  for (uint32_t p : order) {
    buffer.clear(), starts.clear(), pack.clear();
    for (uint32_t k : packs[p]) {
      starts.push_back(buffer.size());
      append_spill_record(instances[k], buffer);
    }
    for (size_t at : starts) pack.emplace_back(buffer.data() + at, buffer.size() - at, "(memory)", at);
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
  auto instances = create_training_instances_python(store, o.instances, vocab, o.dupe_factor, int64_t(o.seed));
  instances_clock.add_to(stats.instances_seconds, stats.instances_cpu_seconds);
  const StageClock write_clock;
  stats.instances = instances.size();
  stats.train_documents = store.num_documents();
  const BertShardFillerOptions filler_options{.seq_len = o.instances.seq_len,
                                              .max_predictions = o.instances.max_predictions,
                                              .compression_level = o.compression_level,
                                              .mask_id = vocab.mask,
                                              .max_pack = o.max_pack};
  const LengthBins bins = length_bins(o);
  BertSplitWriter writer(output, bins, filler_options, stats);
  if (o.max_pack > 0) {
    write_packs(o, instances, writer, stats);
  } else {
    // With length bins, each bin's instances in the script's order, bin by bin.
    std::vector<std::vector<const BertInstance*>> by_bin(size_t(bins.count()));
    for (const auto& inst : instances) by_bin[size_t(bins.bin_of(inst.tokens.size()))].push_back(&inst);
    std::string buffer;  // one instance as a spill record: the rows and statistics come from one place
    for (int bin = 0; bin < bins.count(); ++bin) {
      writer.begin_bin(bin, by_bin[size_t(bin)].size());
      for (const BertInstance* inst : by_bin[size_t(bin)]) {
        buffer.clear();
        append_spill_record(*inst, buffer);
        writer.add(SpillRecord(buffer.data(), buffer.size(), "(memory)", 0));
      }
      writer.end_bin();
    }
  }
  write_clock.add_to(stats.write_seconds, stats.write_cpu_seconds);
  writer.finish(stats.to_json(o.instances.seq_len));
}

}  // namespace pretrain
