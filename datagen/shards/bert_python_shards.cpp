#include "datagen/shards/bert_python_shards.h"

#include <string>

#include "common/log.h"
#include "datagen/shards/bert_shard_filler.h"
#include "datagen/shards/bert_spill_record.h"
#include "datagen/shards/length_bins.h"

namespace pretrain {

void write_bert_python_shards(const BertPythonOptions& o, const BertMaskVocab& vocab, const TokenStore& store,
                              const SplitOutput& output, MakeShardsStats& stats) {
  o.check();
  output.check();
  if (output.valid) throw UsageError("--rng python reproduces the Python script, which has no valid split");
  InMemoryCorpus corpus;
  corpus.documents.resize(store.num_documents());
  for (size_t d = 0; d < store.num_documents(); ++d)
    for (size_t i = 0; i < store.num_sentences(d); ++i) {
      auto s = store.sentence(d, i);
      corpus.documents[d].emplace_back(s.begin(), s.end());
    }
  log_info("--rng python: building instances sequentially, as create_pretraining_data.py does");
  const StageClock instances_clock;
  auto instances = create_training_instances_python(corpus, o.instances, vocab, o.dupe_factor, int64_t(o.seed));
  instances_clock.add_to(stats.instances_seconds, stats.instances_cpu_seconds);
  const StageClock write_clock;
  stats.instances = instances.size();
  stats.train_documents = store.num_documents();
  const BertShardFillerOptions filler_options{.seq_len = o.instances.seq_len,
                                              .max_predictions = o.instances.max_predictions,
                                              .compression_level = o.compression_level,
                                              .mask_id = vocab.mask};
  // With length bins, each bin's instances in the script's order, bin by bin.
  const LengthBins bins = length_bins(o);
  std::vector<std::vector<const BertInstance*>> by_bin(size_t(bins.count()));
  for (const auto& inst : instances) by_bin[size_t(bins.bin_of(inst.tokens.size()))].push_back(&inst);
  BertSplitWriter writer(output, bins, filler_options, stats);
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
  write_clock.add_to(stats.write_seconds, stats.write_cpu_seconds);
  writer.finish(stats.to_json(o.instances.seq_len));
}

}  // namespace pretrain
