#include "datagen/shards/bert_python_shards.h"

#include <string>

#include "common/log.h"
#include "datagen/shards/bert_shard_filler.h"
#include "datagen/shards/bert_spill_record.h"

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
  ShardSeries series(output, bert_shard_format(filler_options), equal_sizes(instances.size(), output.num_shards));
  BertShardFiller filler(series, filler_options, stats);
  std::string buffer;  // one instance as a spill record: the rows and statistics come from one place
  for (const auto& inst : instances) {
    buffer.clear();
    append_spill_record(inst, buffer);
    filler.add(SpillRecord(buffer.data(), buffer.size(), "(memory)", 0));
  }
  filler.finish();
  stats.shards = series.count();
  write_clock.add_to(stats.write_seconds, stats.write_cpu_seconds);
  series.finish(stats.to_json(o.instances.seq_len));
}

}  // namespace pretrain
