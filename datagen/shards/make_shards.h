// make-pretraining-shards: documents → tokenized, masked training shards.
//
//   bert: NVIDIA-layout HDF5 (formats/bert_hdf5.h), instances by Google's algorithm
//         (bert_instances.h): NSP pairs, 80/10/10 masking, dupe_factor passes.
//   gpt:  Megatron .bin/.idx or llm.c token files: each document's tokens then EOD, documents
//         shuffled with the seed.
//
// Stages, each resumable, in <output>/.work/ until the end:
//   1. tokenize: documents (text format or document shards; see text_documents.h) → sentences
//      (ICU, for bert) → token ids, in parallel, in order → a token store on disk (token_store.h),
//      checkpointed every --checkpoint-bytes of input; --resume skips the documents checkpointed.
//   2. bert: instances per (document, pass) in parallel, each from its own counter-based RNG
//      stream, scattered to spill buckets by a seeded hash of (pass, document, instance);
//      gpt: a seeded permutation of the documents.
//   3. bert: each bucket loaded, shuffled in memory and dealt in order into shards of equal size
//      (±1); gpt: documents written in permuted order. Shards appear atomically one by one, and the
//      manifest is rewritten after each (complete=false), so --resume skips the ones written.
// Memory: the store is mapped and releases its pages past a 1 GiB resident budget (random reads
// map 2 MiB folios: token_store.h), a bucket is ~256 MiB, so peak RSS does not grow with the
// corpus (--rng python excepted: it holds the corpus, as the Python script does). Output bytes
// depend only on inputs, tokenizer, options and seed — never on --threads.
//
// `rng = python` instead runs the Python script's sequential algorithm with CPython's Mersenne
// Twister over the whole corpus in memory: same input, vocabulary and seed give the records of
// NVIDIA's create_pretraining_data.py exactly (tests/compat/test_make_shards_golden.py).
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "common/model_kind.h"
#include "common/error.h"
#include "datagen/shards/bert_instances.h"
#include "datagen/shards/token_store.h"
#include "tokenizer/tokenizer.h"

namespace pretrain {

enum class ShardRng { counter, python };
enum class GptFormat { megatron, llmc };

struct MakeShardsOptions {
  ModelKind model = ModelKind::bert;
  std::vector<std::string> inputs;
  std::string tokenizer;
  TokenizerOptions tokenizer_options;
  std::string output_dir;
  BertInstanceOptions bert;  // seq_len, max_predictions, masked_lm_prob, short_seq_prob, whole_word_mask
  int dupe_factor = 10;
  // BERT: gzip level of the HDF5 chunks. 4 is what NVIDIA's files have (h5py's compression="gzip");
  // 1 deflates several times faster for files ~10% larger; 0 stores the chunks uncompressed (still
  // inside the gzip filter, so every reader works). The records are the same at every level.
  int compression_level = 4;
  uint64_t seed = 12345;
  ShardRng rng = ShardRng::counter;
  int num_shards = 1;
  double valid_fraction = 0;  // share of documents held out into <output>/valid/
  std::string lang = "en";    // sentence splitting of document-shard inputs
  GptFormat gpt_format = GptFormat::megatron;
  bool resume = false;
  bool keep_work = false;     // keep <output>/.work (the token store and spill buckets)
  uint64_t bucket_bytes = uint64_t{256} << 20;  // spill bucket size target (memory of stage 3)
  std::vector<std::string> args;  // the command line, for the manifest
  // Tests: stop as a kill would after this many shards are committed (0: never).
  int stop_after_shards = 0;
  // Tokenize: a checkpoint (the store flushed, progress.json rewritten) after about this many
  // bytes of document text, from which --resume continues. Tests make it small.
  uint64_t checkpoint_bytes = uint64_t{64} << 20;
  // The token store's resident budget (token_store.h); tests and measurements change it.
  uint64_t store_resident_budget = TokenStore::kResidentBudget;
};

struct MakeShardsStats {
  uint64_t documents = 0, sentences = 0, tokens = 0;  // the tokenized corpus
  uint64_t train_documents = 0, valid_documents = 0;
  uint64_t instances = 0, valid_instances = 0;        // bert: instances; gpt: sequences (documents)
  uint64_t instance_tokens = 0;                       // bert: non-padding tokens; gpt: tokens written
  uint64_t predictions = 0, masked_as_mask = 0, masked_kept = 0, masked_random = 0;
  uint64_t random_next = 0, forced_random_next = 0;  // B random; random because the chunk had one sentence
  uint64_t document_passes = 0, short_document_passes = 0, short_target_instances = 0;
  std::vector<uint64_t> length_histogram;             // bert: instances per length bin (seq_len/16 wide)
  uint64_t shards = 0;
  double seconds = 0;
  // Wall time per stage: tokenize (incl. sentence splitting), instances (bert: generate and spill),
  // write (bert: shuffle buckets and write shards; gpt: write shards).
  double tokenize_seconds = 0, instances_seconds = 0, write_seconds = 0;
  // The same stages in CPU seconds of the whole process (user + system): on a shared machine the
  // least distorted measure of work, and CPU / wall is how many threads a stage kept busy.
  double tokenize_cpu_seconds = 0, instances_cpu_seconds = 0, write_cpu_seconds = 0;
  nlohmann::json to_json(int seq_len) const;          // with the derived shares
};

struct MakeShardsInterrupted : Error {
  using Error::Error;
};

MakeShardsStats run_make_shards(const MakeShardsOptions& options);

}  // namespace pretrain
