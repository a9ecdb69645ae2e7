// make-pretraining-shards: documents → tokenized, masked training shards. This is the tool's entry
// point; run_make_shards() maps its options onto the stages', each in its own module:
//
//   1. tokenize_documents.h: documents (text format or document shards; see text_documents.h) →
//      sentences (ICU, for bert) → token ids, in parallel, in order → a token store on disk
//      (token_store.h), checkpointed every --checkpoint-bytes of input; --resume skips the
//      documents checkpointed. The input is cut into pieces (input_pieces.h) that depend on the
//      input alone; under mpirun each rank reads and tokenizes only its run of them, and the
//      pieces are then moved into the one store (tokenize_in_pieces).
//   2. document_split.h: the store's documents into train and valid (gpt: in a seeded order).
//   3. per split, instances or token streams → shards, through shard_series.h (numbered shards
//      committed one by one, the manifest rewritten after each (complete=false), so --resume
//      skips the ones written):
//      bert: bert_counter_shards.h (instances per (document, pass) in parallel from counter-based
//            RNG streams → spill buckets, every split's first → each shuffled [→ packed, --pack] →
//            bert_shard_filler.h → NVIDIA-layout HDF5), or bert_python_shards.h (--rng python:
//            NVIDIA's create_pretraining_data.py exactly, sequential, the corpus in memory);
//      gpt:  gpt_shards.h: each document's tokens then EOD, documents shuffled with the seed,
//            spread from the store into per-shard buckets, then into Megatron .bin/.idx or llm.c
//            token files.
//
// Work files are in <output>/.work/, and each goes once the stages after it have committed what
// they need from it (--keep-work keeps them all): the store once every BERT instance is made (its
// blocks as they are spread, for GPT; --rng python keeps it to the end), a spill bucket or GPT
// bucket once the shards it feeds are committed (a BERT shard's record counts recorded with
// it). store.json then says who took the store over; a resumed run goes on from the last stage
// committed and never reads what was freed: a stage that needs a freed file is an error naming
// it. So the disk holds about the output at its peak, not the output plus the store plus the
// buckets. Memory: the store is mapped and releases its pages past a 1 GiB resident budget
// (random reads map 2 MiB folios: token_store.h), a bucket is ~256 MiB, so peak RSS does not grow
// with the corpus (--rng python excepted: it holds the corpus, as the Python script does). Output
// bytes depend only on inputs, tokenizer, options and seed — never on --threads or the ranks.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/model_kind.h"
#include "datagen/shards/bert_instances.h"
#include "datagen/shards/gpt_shards.h"
#include "datagen/shards/input_pieces.h"
#include "datagen/shards/make_shards_stats.h"
#include "datagen/shards/packing.h"
#include "datagen/shards/rng_streams.h"
#include "datagen/shards/shard_series.h"
#include "datagen/shards/token_store.h"
#include "formats/bert_hdf5.h"
#include "tokenizer/tokenizer.h"

namespace pretrain {

enum class ShardRng { counter, python };

struct MakeShardsOptions {
  ModelKind model = ModelKind::bert;
  std::vector<std::string> inputs;
  std::string tokenizer;
  TokenizerOptions tokenizer_options;
  std::string output_dir;
  BertInstanceOptions bert;  // seq_len, max_predictions, masked_lm_prob, short_seq_prob, whole_word_mask
  int dupe_factor = kBertDupeFactor;
  // BERT: gzip level of the HDF5 chunks, 0–9 (libdeflate's levels, which follow zlib's scale). The
  // default, 1, makes files about as small as NVIDIA's (zlib's level 4) for a third of the CPU time;
  // higher levels make them a few % smaller for several times more; 0 stores the chunks
  // uncompressed (still inside the gzip filter, so every reader works). The records are the same at
  // every level.
  int compression_level = kDefaultGzipLevel;
  uint64_t seed = kDefaultShardSeed;
  ShardRng rng = ShardRng::counter;
  int num_shards = 1;          // per split; with bin_size, per bin (at most one per record)
  int bin_size = 0;            // BERT: LDDL's length bins (length_bins.h); 0: none
  bool pack = false;           // BERT: several instances per row (packing.h; not with bin_size)
  std::optional<int> max_pack;  // --max-pack: instances per packed row (only with pack); kDefaultMaxPack
  double valid_fraction = 0;  // share of documents held out into <output>/valid/
  std::string lang = "en";    // sentence splitting of document-shard inputs
  GptFormat gpt_format = GptFormat::megatron;
  bool resume = false;
  bool keep_work = false;     // keep <output>/.work (the token store, spill and GPT buckets) as it is
                              // made, rather than freeing each file once the stages after it are done
  uint64_t bucket_bytes = uint64_t{256} << 20;  // spill bucket size target (memory of stage 3)
  std::vector<std::string> args;  // the command line, for the manifest
  // Tests: stop as a kill would after this many shards are committed (0: never).
  int stop_after_shards = 0;
  // Tokenize: a checkpoint (the store flushed, progress.json rewritten) after about this many
  // bytes of document text, from which --resume continues. Tests make it small.
  uint64_t checkpoint_bytes = uint64_t{64} << 20;
  // Tokenize: the input's pieces (input_pieces.h); tests make them small.
  uint64_t piece_bytes = kDefaultPieceBytes;
  // What moves between work files at a time, at most (else ~1/32 of the store, from 1 MiB): a
  // piece of the store into the store, store tokens into GPT buckets (each chunk on disk before
  // its source is freed, so it is held twice). Tests make it small.
  uint64_t move_chunk_bytes = uint64_t{64} << 20;
  // The token store's resident budget (token_store.h); tests and measurements change it.
  uint64_t store_resident_budget = TokenStore::kResidentBudget;
};

// Throws UsageError for bad options before anything is written, MakeShardsInterrupted
// (shard_series.h) when stop_after_shards stops it.
MakeShardsStats run_make_shards(const MakeShardsOptions& options);

}  // namespace pretrain
