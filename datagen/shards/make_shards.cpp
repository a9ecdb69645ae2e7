// The orchestrator: checks the options, maps them onto each stage's own, and runs the stages in
// order (make_shards.h lists them).
#include "datagen/shards/make_shards.h"

#include <cstdlib>
#include <filesystem>
#include <optional>

#include "common/cli.h"
#include "common/comm_watchdog.h"
#include "common/communicator.h"
#include "common/file.h"
#include "common/log.h"
#include "common/manifest.h"
#include "datagen/shards/bert_counter_shards.h"
#include "datagen/shards/bert_python_shards.h"
#include "datagen/shards/document_split.h"
#include "datagen/shards/text_documents.h"
#include "datagen/shards/tokenize_documents.h"
#include "datagen/shards/token_store.h"

namespace pretrain {

namespace {

// Instances per packed row; 0: not packed.
int max_pack(const MakeShardsOptions& o) { return o.pack ? o.max_pack.value_or(kDefaultMaxPack) : 0; }

BertMaskVocab mask_vocab_of(const Tokenizer& tok) {
  std::vector<std::string> entries(size_t(tok.vocab_size()));
  for (TokenId32 id = 0; id < tok.vocab_size(); ++id) entries[size_t(id)] = tok.id_to_token(id);
  return make_bert_mask_vocab(entries, tok.source());
}

// What made one split's shards: a resumed run keeps shards (and spill buckets) only of the same key.
nlohmann::json run_key(const MakeShardsOptions& o, const nlohmann::json& store_key, bool valid) {
  return {{"store", store_key},
          {"split", valid ? "valid" : "train"},
          {"seq_len", o.bert.seq_len},
          {"max_predictions", o.bert.max_predictions},
          {"masked_lm_prob", o.bert.masked_lm_prob},
          {"short_seq_prob", o.bert.short_seq_prob},
          {"whole_word_mask", o.bert.whole_word_mask},
          {"dupe_factor", o.dupe_factor},
          {"compression_level", o.compression_level},
          {"seed", o.seed},
          {"rng", o.rng == ShardRng::python ? "python" : "counter"},
          {"num_shards", o.num_shards},
          {"valid_fraction", o.valid_fraction},
          {"gpt_format", o.gpt_format == GptFormat::megatron ? "megatron" : "llmc"}};
}

nlohmann::json split_key(const MakeShardsOptions& o, const nlohmann::json& store_key, bool valid) {
  nlohmann::json key = run_key(o, store_key, valid);
  if (o.bin_size > 0) key["bin_size"] = o.bin_size;  // absent without bins: unbinned keys stay as they were
  if (o.pack) key["pack"] = true, key["max_pack"] = max_pack(o);  // likewise absent unpacked
  return key;
}

std::string work_dir(const MakeShardsOptions& o) { return path_join(o.output_dir, ".work"); }

SplitOutput split_output(const MakeShardsOptions& o, const TokenizerInfo& tokenizer, const nlohmann::json& store_key,
                         bool valid) {
  SplitOutput out;
  out.valid = valid;
  out.dir = valid ? path_join(o.output_dir, "valid") : o.output_dir;
  out.num_shards = valid ? valid_shard_count(o.num_shards, o.valid_fraction) : o.num_shards;
  out.manifest.tokenizer = tokenizer;
  out.manifest.tool = cat("make-pretraining-shards ", version_string());
  out.manifest.args = o.args;
  out.manifest.seed = o.seed;
  out.manifest.extra["key"] = split_key(o, store_key, valid);
  out.resume = o.resume;
  out.stop_after_shards = o.stop_after_shards;
  out.ranks = &Communicator::world();
  out.commits_dir = path_join(work_dir(o), valid ? "commits-valid" : "commits-train");
  return out;
}

TokenizeOptions tokenize_options(const MakeShardsOptions& o) {
  return {.model = o.model,
          .lang = o.lang,
          .tokenizer_options = o.tokenizer_options,
          .resume = o.resume,
          .checkpoint_bytes = o.checkpoint_bytes,
          .piece_bytes = o.piece_bytes,
          .move_chunk_bytes = o.move_chunk_bytes};
}

DocumentSplitOptions split_options(const MakeShardsOptions& o) {
  return {.seed = o.seed, .valid_fraction = o.valid_fraction, .shuffle = o.model == ModelKind::gpt};
}

BertStageOptions bert_stage_options(const MakeShardsOptions& o) {
  return {.instances = o.bert,
          .dupe_factor = o.dupe_factor,
          .seed = o.seed,
          .compression_level = o.compression_level,
          .bin_size = o.bin_size,
          .max_pack = max_pack(o)};
}

BertCounterOptions bert_counter_options(const MakeShardsOptions& o, bool valid) {
  BertCounterOptions c;
  static_cast<BertStageOptions&>(c) = bert_stage_options(o);
  c.spill_dir = path_join(work_dir(o), valid ? "spill-valid" : "spill-train");
  c.bucket_bytes = o.bucket_bytes;
  c.store_resident_budget = o.store_resident_budget;
  c.free_buckets = !o.keep_work;
  return c;
}

GptShardsOptions gpt_options(const MakeShardsOptions& o, const Tokenizer& tok) {
  return {.format = o.gpt_format,
          .vocab_size = tok.vocab_size(),
          .work_dir = path_join(work_dir(o), "gpt"),
          .free_store = !o.keep_work,
          .chunk_bytes = o.move_chunk_bytes};
}

// The stage that takes the token store over once it is made and frees it as it goes (store.json
// says so): BERT's instances (both splits'), GPT's spread; none for --rng python, which keeps the
// store to the end.
nlohmann::json store_consumer(const MakeShardsOptions& o, const nlohmann::json& store_key) {
  if (o.model == ModelKind::bert && o.rng == ShardRng::python) return nullptr;
  return {{"stage", o.model == ModelKind::gpt ? "gpt-spread" : "bert-instances"}, {"key", split_key(o, store_key, false)}};
}

// Before anything is written: each stage's own checks, and those of the command line as a whole.
void check_options(const MakeShardsOptions& o) {
  if (o.inputs.empty()) throw UsageError("no inputs");
  split_output(o, TokenizerInfo{}, nlohmann::json(), false).check();
  split_options(o).check();
  if (o.dupe_factor < 1) throw UsageError("--dupe-factor must be at least 1");  // gpt too, as it always was
  if (o.bin_size != 0 && o.model != ModelKind::bert)
    throw UsageError("--bin-size bins BERT instances by length; GPT samples are all --seq-len long");
  if (o.max_pack && !o.pack) throw UsageError("--max-pack sets how many instances --pack puts in a row: add --pack");
  if (o.pack && o.model != ModelKind::bert)
    throw UsageError("--pack packs BERT instances into rows; GPT samples are all --seq-len long already");
  if (o.piece_bytes == 0) throw UsageError("the input's piece size must be positive");
  if (o.move_chunk_bytes == 0) throw UsageError("the move chunk size must be positive");
  if (o.pack && (max_pack(o) < 1 || max_pack(o) > 127))
    throw UsageError(cat("--max-pack must be in [1, 127] (sequence_ids is int8), not ", max_pack(o)));
  if (o.model == ModelKind::bert) {
    if (o.rng == ShardRng::python)
      bert_stage_options(o).check();
    else
      bert_counter_options(o, false).check();
    if (o.rng == ShardRng::python && o.valid_fraction > 0)
      throw UsageError("--rng python reproduces the Python script, which has no valid split: drop --valid-fraction");
  }
}

// What a resumed run finds of the token store (rank 0's verdict, for every rank).
enum class StoreFound : uint8_t { none, whole, taken };

StoreFound find_store(const MakeShardsOptions& o, const std::string& store_dir, const nlohmann::json& key,
                      const nlohmann::json& consumer) {
  uint8_t found = uint8_t(StoreFound::none);
  if (Communicator::world().rank() == 0 && o.resume) {
    const auto meta = read_token_store_meta(store_dir, key);
    if (meta && meta->taken_by.is_null() && TokenStore::complete(store_dir, key)) {
      found = uint8_t(StoreFound::whole);
      log_info("--resume: the token store is complete; not tokenizing again");
    } else if (meta && !meta->taken_by.is_null() && meta->taken_by == consumer) {
      found = uint8_t(StoreFound::taken);
      log_info(cat("--resume: the token store was made, and taken over by ", consumer.at("stage").get<std::string>(),
                   meta->freed ? ", which freed it" : ""));
    } else if (meta && !meta->taken_by.is_null()) {
      log_info("--resume: the token store was taken over (and freed) by a run with other options; tokenizing again");
    }
  }
  Communicator::world().broadcast(&found, 1, 0);
  return StoreFound(found);
}

// The store freed by rank 0 once every rank has let it go (it was taken over first).
void free_store(std::optional<TokenStore>& store, const std::string& store_dir, const nlohmann::json& consumer) {
  store.reset();
  Communicator::world().barrier();
  if (Communicator::world().rank() == 0) {
    take_token_store(store_dir, consumer);
    free_token_store(store_dir);
  }
  fault_point("store-freed");  // tests: killed right after
}

// Stage 3 for BERT with the counter RNG: every split's instances first (the store's last
// readers), then the store freed, then each split's shards.
void bert_counter_splits(const MakeShardsOptions& o, const TokenizerInfo& tokenizer, const BertMaskVocab& vocab,
                         const nlohmann::json& skey, const DocumentSplit& split, std::optional<TokenStore>& store,
                         const std::string& store_dir, const nlohmann::json& consumer, MakeShardsStats& stats) {
  CommWatchdog& watchdog = comm_watchdog();
  for (bool valid : {false, true}) {
    const std::vector<uint32_t>& documents = valid ? split.valid : split.train;
    if (valid && documents.empty()) continue;
    watchdog.set_stage(valid ? "instances (valid)" : "instances");
    fault_point("instances");
    spill_bert_counter_split(bert_counter_options(o, valid), vocab, store ? &*store : nullptr, documents,
                             split_output(o, tokenizer, skey, valid), stats);
  }
  if (!o.keep_work && store) free_store(store, store_dir, consumer);
  for (bool valid : {false, true}) {
    if (valid && split.valid.empty()) continue;
    watchdog.set_stage(valid ? "write (valid)" : "write");
    write_bert_counter_shards(bert_counter_options(o, valid), vocab, split_output(o, tokenizer, skey, valid), stats);
  }
}

// Stage 3 for GPT: the store spread into the shards' buckets (freeing it behind), then the shards.
void gpt_splits(const MakeShardsOptions& o, const Tokenizer& tok, const nlohmann::json& skey,
                const DocumentSplit& split, std::optional<TokenStore>& store, const std::string& store_dir,
                const nlohmann::json& consumer, MakeShardsStats& stats) {
  CommWatchdog& watchdog = comm_watchdog();
  std::vector<GptSplit> splits = {{split.train, split_output(o, tok.info(), skey, false)}};
  if (!split.valid.empty()) splits.push_back({split.valid, split_output(o, tok.info(), skey, true)});
  watchdog.set_stage("spread");
  fault_point("write");
  GptSplitsWriter writer(gpt_options(o, tok), std::move(splits), consumer.at("key"));
  const Communicator& world = Communicator::world();
  if (!writer.spread_done()) {
    if (!store)
      throw Error(Where{store_dir}, "the token store was freed as it was spread into the GPT buckets, but the spread "
                                    "is not complete: run again without --resume");
    if (!o.keep_work && world.rank() == 0) take_token_store(store_dir, consumer);  // before any of it is freed
    world.barrier();
    writer.spread(&*store);
  }
  if (!o.keep_work && store) free_store(store, store_dir, consumer);
  watchdog.set_stage("write");
  writer.write(stats);
}

}  // namespace

MakeShardsStats run_make_shards(const MakeShardsOptions& o) {
  check_options(o);
  const Communicator& world = Communicator::world();
  CommWatchdog& watchdog = comm_watchdog();  // names the stage a stalled collective waited in
  watchdog.set_stage("start");
  const StageClock run_clock;
  MakeShardsStats stats;
  auto tok = load_tokenizer(o.tokenizer, o.tokenizer_options);
  BertMaskVocab vocab;
  if (o.model == ModelKind::bert) vocab = mask_vocab_of(*tok);  // fails early on a vocab without [MASK]
  // This job alone in the directory, before it writes (taking the lock creates the directory, so
  // only once the options and the tokenizer are known good).
  const auto lock = lock_dir_for_job(o.output_dir, world);

  // Stage 1: documents → token store. Without --resume nothing of an earlier run is used.
  const std::string work = work_dir(o);
  const std::string store_dir = path_join(work, "store");
  if (world.rank() == 0) {
    if (!o.resume) std::filesystem::remove_all(work);
    make_dirs(work);
  }
  world.barrier();
  TextDocumentReader reader(o.inputs);
  const TokenizeOptions tokenize = tokenize_options(o);
  const nlohmann::json skey = token_store_key(tokenize, *tok, reader);
  const nlohmann::json consumer = store_consumer(o, skey);
  if (find_store(o, store_dir, skey, consumer) == StoreFound::none) {
    const StageClock clock;
    watchdog.set_stage("tokenize");
    fault_point("tokenize");
    tokenize_in_pieces(tokenize, *tok, o.inputs, store_dir, skey, world);
    clock.add_to(stats.tokenize_seconds, stats.tokenize_cpu_seconds);
    fault_point("tokenized");  // tests: killed with the store committed
  }
  const auto meta = read_token_store_meta(store_dir, skey);
  if (!meta) throw Error(Where{store_dir}, "internal: no committed token store after tokenizing");
  std::optional<TokenStore> store;
  if (!meta->freed) store.emplace(store_dir, o.store_resident_budget);
  stats.documents = meta->counts.documents;
  stats.sentences = meta->counts.sentences;
  stats.tokens = meta->counts.tokens;
  log_info(cat("corpus: ", stats.documents, " documents, ", stats.sentences, " sentences, ", stats.tokens, " tokens"));
  if (stats.documents == 0) throw Error(Where{o.inputs.front()}, "no text found in the inputs");

  if (o.model == ModelKind::bert && o.rng == ShardRng::python) {
    // The Python script's algorithm, over every document (it has no valid split). It is one
    // sequence of draws from one generator: rank 0 runs it alone, the others wait.
    watchdog.set_stage("bert-python");
    if (!store) throw Error(Where{store_dir}, "internal: --rng python without its token store");
    if (world.rank() == 0) {
      SplitOutput output = split_output(o, tok->info(), skey, false);
      output.ranks = nullptr;
      write_bert_python_shards(bert_stage_options(o), vocab, *store, output, stats);
    }
    // The others wait for as long as the corpus takes rank 0: that wait is not a stall, and goes
    // unwatched (a rank 0 that dies still ends the job through mpirun). Rank 0's own is watched.
    const double timeout = watchdog.timeout();
    if (world.rank() != 0) watchdog.set_timeout(0);
    world.barrier();
    watchdog.set_timeout(timeout);
  } else {
    // Stage 2: train and valid documents; stage 3: each split's shards.
    const DocumentSplit split = split_documents(uint32_t(stats.documents), split_options(o));
    stats.train_documents = split.train.size();
    stats.valid_documents = split.valid.size();
    if (o.model == ModelKind::gpt)
      gpt_splits(o, *tok, skey, split, store, store_dir, consumer, stats);
    else
      bert_counter_splits(o, tok->info(), vocab, skey, split, store, store_dir, consumer, stats);
  }
  store.reset();
  stats.seconds = run_clock.wall_seconds();
  watchdog.set_stage("finish");
  world.barrier();
  if (!o.keep_work && world.rank() == 0) std::filesystem::remove_all(work);
  return stats;
}

}  // namespace pretrain
