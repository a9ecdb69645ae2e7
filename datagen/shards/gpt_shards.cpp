#include "datagen/shards/gpt_shards.h"

#include "common/error.h"
#include "common/file.h"
#include "common/manifest.h"
#include "common/progress.h"
#include "formats/llmc.h"
#include "formats/megatron.h"

namespace pretrain {

ShardFormat gpt_shard_format(const GptShardsOptions& o) {
  if (o.format == GptFormat::megatron) return {.name = kFormatMegatron, .extension = ".bin"};
  return {.name = kFormatLlmc, .extension = ".llmc.bin"};
}

void GptShardsOptions::check() const {
  if (vocab_size <= 0) throw UsageError(cat("a GPT vocabulary of ", vocab_size, " tokens"));
}

void write_gpt_split(const GptShardsOptions& o, const TokenStore& store, const std::vector<uint32_t>& docs,
                     const SplitOutput& output, MakeShardsStats& stats) {
  o.check();
  output.check();
  const bool megatron = o.format == GptFormat::megatron;
  const std::vector<uint64_t> sizes = equal_sizes(docs.size(), output.num_shards);
  ShardSeries series(output, gpt_shard_format(o), sizes);
  const StageClock write_clock;
  const MegatronDType dtype = megatron_optimal_dtype(o.vocab_size);
  const LlmcFormat llmc_format = o.vocab_size <= 65536 ? LlmcFormat::gpt2 : LlmcFormat::llama3;
  Progress progress(output.valid ? "gpt shards (valid)" : "gpt shards", docs.size());
  size_t next = 0;
  for (size_t shard = 0; shard < series.count(); ++shard) {
    const size_t begin = next, end = next + sizes[shard];
    next = end;
    uint64_t tokens = 0;
    for (size_t i = begin; i < end; ++i) tokens += store.document_tokens(docs[i]).size();
    stats.instance_tokens += tokens;
    (output.valid ? stats.valid_instances : stats.instances) += end - begin;
    if (!series.kept(shard)) {
      const std::string path = series.path(shard);
      if (megatron) {
        const std::string prefix = megatron_prefix(path);
        MegatronWriter w(prefix, dtype);
        for (size_t i = begin; i < end; ++i) {
          w.add_sequence(store.document_tokens(docs[i]));
          w.end_document();
        }
        w.finalize();
        series.committed(shard, end - begin, {{base_name(megatron_idx_path(prefix)), ""}});
      } else {
        LlmcWriter w(path, llmc_format);
        for (size_t i = begin; i < end; ++i) w.add(store.document_tokens(docs[i]));
        w.commit();
        series.committed(shard, w.tokens_written());
      }
    }
    progress.add(end - begin);
    store.release_pages();
  }
  progress.finish();
  stats.shards += series.count();
  write_clock.add_to(stats.write_seconds, stats.write_cpu_seconds);
  series.finish(stats.to_json(0));
}

}  // namespace pretrain
