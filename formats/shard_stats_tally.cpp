// shard-tool stats: counting one shard (shard_stats_internal.h).
#include <tbb/enumerable_thread_specific.h>
#include <tbb/parallel_for.h>
#include <tbb/parallel_pipeline.h>

#include <algorithm>
#include <array>
#include <limits>
#include <memory>
#include <type_traits>

#include "common/cli.h"
#include "common/error.h"
#include "common/file.h"
#include "formats/bert_hdf5.h"
#include "formats/doc_shards.h"
#include "formats/llmc.h"
#include "formats/megatron.h"
#include "formats/shard_stats_internal.h"

namespace pretrain::shard_stats_internal {

void check_against_manifest(const Shard& s, bool verify) {
  if (!s.entry) return;
  const ShardEntry& e = *s.entry;
  if (verify) {
    Manifest one;
    one.shards = {e};
    for (const VerifyProblem& p : verify_manifest(one, s.root))
      throw Error(Where{path_join(s.root, p.file)}, cat(p.message, " (", path_join(s.root, kManifestName), ")"));
    return;
  }
  if (!file_exists(s.path)) throw Error(Where{s.path}, cat("missing (", path_join(s.root, kManifestName), ")"));
  if (const uint64_t size = file_size(s.path); size != e.bytes)
    throw Error(Where{s.path}, cat("expected ", e.bytes, " bytes, found ", size, " (", path_join(s.root, kManifestName), ")"));
}

namespace {

// The records the manifest says the shard holds, or an Error naming it.
void check_records(const Shard& s, uint64_t found, const char* what) {
  if (s.entry && s.entry->records != found)
    throw Error(Where{s.path}, cat("expected ", s.entry->records, " records, found ", found, " ", what, " (",
                                   path_join(s.root, kManifestName), ")"));
}

}  // namespace

uint64_t disk_bytes(const Shard& s, const std::string& format) {
  uint64_t bytes = file_size(s.path);
  if (format == kFormatMegatron) bytes += file_size(megatron_idx_path(megatron_prefix(s.path)));
  return bytes;
}

// ---------------------------------------------------------------------------------------------
// Token ids

IdKinds::IdKinds(const TokenizerInfo& t) {
  for (const auto& [role, id] : t.special_ids) {
    if (id < 0 || id >= (int64_t{1} << 24)) continue;
    if (size_t(id) >= kinds_.size()) kinds_.resize(size_t(id) + 1, text);
    kinds_[size_t(id)] = role == "unk" ? unknown : special;
    if (role == "unk") unk_id_ = id;
  }
}

// ---------------------------------------------------------------------------------------------
// Documents

namespace {

// ASCII white space: what separates words.
bool is_space(unsigned char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }

}  // namespace

void DocTally::add(const Document& d, const SentenceCounter& count_sentences, const std::unordered_set<std::string>* removed) {
  uint64_t w = 0, p = 0, c = 0;
  bool in_word = false, line_has_text = false;
  for (const char ch : d.text) {
    const auto u = static_cast<unsigned char>(ch);
    c += (u & 0xC0) != 0x80;
    const bool space = is_space(u);
    w += !space && !in_word;
    in_word = !space;
    if (u == '\n') {
      p += line_has_text;
      line_has_text = false;
    } else {
      line_has_text |= !space;
    }
  }
  p += line_has_text;
  ++documents;
  empty += d.text.empty();
  bytes += d.text.size(), chars += c, words += w, paragraphs += p;
  doc_bytes.add(d.text.size()), doc_words.add(w), doc_paragraphs.add(p);
  if (count_sentences) {
    const uint64_t s = count_sentences(d.text);
    sentences += s;
    doc_sentences.add(s);
  }
  if (removed && removed->contains(d.id)) ++duplicates, duplicate_bytes += d.text.size();
}

void DocTally::merge(const DocTally& o) {
  documents += o.documents, empty += o.empty, bytes += o.bytes, chars += o.chars, words += o.words;
  paragraphs += o.paragraphs, sentences += o.sentences, duplicates += o.duplicates, duplicate_bytes += o.duplicate_bytes;
  doc_bytes.merge(o.doc_bytes), doc_words.merge(o.doc_words), doc_paragraphs.merge(o.doc_paragraphs);
  doc_sentences.merge(o.doc_sentences);
}

DocTally tally_docs(const Shard& s, const SentenceCounter& sentences, const std::unordered_set<std::string>* removed) {
  DocReaderOptions ro;
  ro.verify_checksums = false;  // a lone file: check_against_manifest did it
  DocReader reader(s.path, ro);
  DocTally total;
  constexpr size_t kBatchDocs = 256, kBatchBytes = size_t{1} << 20;
  tbb::parallel_pipeline(
      size_t(2 * max_threads() + 2),
      tbb::make_filter<void, std::shared_ptr<std::vector<Document>>>(
          tbb::filter_mode::serial_in_order,
          [&](tbb::flow_control& fc) {
            auto batch = std::make_shared<std::vector<Document>>();
            size_t bytes = 0;
            Document d;
            while (batch->size() < kBatchDocs && bytes < kBatchBytes && reader.next(d)) {
              bytes += d.text.size();
              batch->push_back(std::move(d));
            }
            if (batch->empty()) fc.stop();
            return batch;
          }) &
          tbb::make_filter<std::shared_ptr<std::vector<Document>>, std::shared_ptr<DocTally>>(
              tbb::filter_mode::parallel,
              [&](std::shared_ptr<std::vector<Document>> batch) {
                auto t = std::make_shared<DocTally>();
                for (const Document& d : *batch) t->add(d, sentences, removed);
                return t;
              }) &
          tbb::make_filter<std::shared_ptr<DocTally>, void>(tbb::filter_mode::serial_in_order,
                                                            [&](std::shared_ptr<DocTally> t) { total.merge(*t); }));
  check_records(s, total.documents, "documents");
  return total;
}

// ---------------------------------------------------------------------------------------------
// BERT instances

void BertTally::merge(const BertTally& o) {
  rows += o.rows, instances += o.instances, real_tokens += o.real_tokens, text_tokens += o.text_tokens;
  unk += o.unk, predictions += o.predictions, nsp_random += o.nsp_random;
  instance_tokens.merge(o.instance_tokens), row_tokens.merge(o.row_tokens), row_instances.merge(o.row_instances);
}

namespace {

// What the stats read of a BERT shard: the rest (segment_ids, position_ids, next_sentence_positions,
// and one of the two NSP label columns) is never inflated.
constexpr std::array<std::string_view, 5> kPlainColumns = {"input_ids", "input_mask", "masked_lm_positions",
                                                           "masked_lm_ids", "next_sentence_labels"};
constexpr std::array<std::string_view, 6> kPackedColumns = {"input_ids", "input_mask", "masked_lm_positions",
                                                            "masked_lm_ids", "sequence_ids", "packed_next_sentence_labels"};

}  // namespace

BertTally tally_bert(const Shard& s, const BertShape& want, const IdKinds& kinds) {
  BertShardReader reader(s.path);
  check_records(s, uint64_t(reader.size()), "records");
  if (reader.seq_len() != want.seq_len)
    throw Error(Where{s.path}, cat("seq_len ", reader.seq_len(), ", expected ", want.seq_len, " (the set's)"));
  if (reader.max_pack() != want.max_pack)
    throw Error(Where{s.path}, cat("max_pack ", reader.max_pack(), ", expected ", want.max_pack, " (the set's; 0: not packed)"));
  const bool packed = want.max_pack > 0;
  if (packed) reader.read_only(kPackedColumns);
  else reader.read_only(kPlainColumns);
  const int64_t seq = reader.seq_len();
  BertTally t;
  BertBatch b;
  std::vector<int32_t> ids(size_t(seq), 0);
  std::vector<uint32_t> lengths(size_t(want.max_pack) + 1);
  constexpr int64_t kRows = 4096;
  for (int64_t begin = 0; begin < reader.size(); begin += kRows) {
    reader.read_range(begin, std::min(kRows, reader.size() - begin), b);
    for (int64_t i = 0; i < b.size; ++i) {
      // The ids before masking: each prediction's original id back at its position (never 0, the [CLS]).
      std::copy_n(b.input_ids.begin() + i * seq, seq, ids.begin());
      for (int64_t j = 0; j < b.max_predictions; ++j)
        if (const int32_t p = b.masked_lm_positions[size_t(i * b.max_predictions + j)]; p > 0) {
          ids[size_t(p)] = b.masked_lm_ids[size_t(i * b.max_predictions + j)];
          ++t.predictions;
        }
      uint64_t real = 0, special = 0;
      const int8_t* mask = b.input_mask.data() + i * seq;
      for (int64_t k = 0; k < seq; ++k) {
        if (!mask[k]) continue;
        ++real;
        const IdKinds::Kind kind = kinds(ids[size_t(k)]);
        special += kind == IdKinds::special;
        t.unk += kind == IdKinds::unknown;
      }
      ++t.rows;
      t.real_tokens += real;
      t.text_tokens += real - special;
      t.row_tokens.add(real);
      if (!packed) {
        ++t.instances;
        t.instance_tokens.add(real);
        t.nsp_random += b.next_sentence_labels[size_t(i)] == 1;
        continue;
      }
      std::fill(lengths.begin(), lengths.end(), 0);
      for (int64_t k = 0; k < seq; ++k) ++lengths[size_t(b.sequence_ids[size_t(i * seq + k)])];  // the reader checked 0..max_pack
      uint64_t held = 0;
      for (int64_t j = 1; j <= want.max_pack; ++j)
        if (lengths[size_t(j)]) {
          ++held;
          t.instance_tokens.add(lengths[size_t(j)]);
          t.nsp_random += b.packed_next_sentence_labels[size_t(i * want.max_pack + j - 1)] == 1;
        }
      t.instances += held;
      t.row_instances.add(held);
    }
  }
  return t;
}

// ---------------------------------------------------------------------------------------------
// GPT tokens (Megatron, llm.c)

void TokenTally::merge(const TokenTally& o) {
  documents += o.documents, sequences += o.sequences, tokens += o.tokens;
  if (o.id_counts.size() > id_counts.size()) id_counts.resize(o.id_counts.size(), 0);
  for (size_t id = 0; id < o.id_counts.size(); ++id) id_counts[id] += o.id_counts[id];
  doc_tokens.merge(o.doc_tokens), seq_tokens.merge(o.seq_tokens);
}

namespace {

constexpr int64_t kMaxId = int64_t{1} << 24;  // tokenizer.h's kMaxTokenId: no vocabulary is larger
constexpr size_t kPieceTokens = size_t{1} << 20;

// Counts the ids of tokens[0, n) into `counts` in pieces on the workers; at(piece, i) is told of
// each token (llm.c: where the end-of-text ids are). Error naming `path` and the token for an id
// outside [0, 2^24).
template <typename T, typename At>
void count_ids(const T* tokens, size_t n, std::vector<uint64_t>& counts, const std::string& path, const At& at) {
  tbb::enumerable_thread_specific<std::vector<uint64_t>> local;
  tbb::parallel_for(size_t{0}, (n + kPieceTokens - 1) / kPieceTokens, [&](size_t piece) {
    std::vector<uint64_t>& mine = local.local();
    if (mine.empty()) mine.assign(std::is_same_v<T, uint16_t> || sizeof(T) == 1 ? size_t{65536} : size_t{0}, 0);
    for (size_t i = piece * kPieceTokens; i < std::min(n, (piece + 1) * kPieceTokens); ++i) {
      const T id = tokens[i];
      if constexpr (std::is_signed_v<T> || sizeof(T) > 2) {
        if (int64_t(id) < 0 || int64_t(id) >= kMaxId)
          throw Error(Where{path}, cat("token ", i, " is ", int64_t(id), ": not an id of any vocabulary"));
        if (size_t(id) >= mine.size()) mine.resize(size_t(id) + 1, 0);
      }
      ++mine[size_t(id)];
      at(piece, i, int64_t(id));
    }
  });
  for (const std::vector<uint64_t>& mine : local) {
    if (mine.size() > counts.size()) counts.resize(mine.size(), 0);
    for (size_t id = 0; id < mine.size(); ++id) counts[id] += mine[id];
  }
  while (!counts.empty() && counts.back() == 0) counts.pop_back();
}

template <typename At>
void count_megatron_ids(const TokenSpan& all, std::vector<uint64_t>& counts, const std::string& path, const At& at) {
  auto as = [&](auto zero) { count_ids(static_cast<const decltype(zero)*>(all.data), all.size, counts, path, at); };
  switch (all.dtype) {
    case MegatronDType::u8: return as(uint8_t{});
    case MegatronDType::i8: return as(int8_t{});
    case MegatronDType::i16: return as(int16_t{});
    case MegatronDType::u16: return as(uint16_t{});
    case MegatronDType::i32: return as(int32_t{});
    case MegatronDType::i64: return as(int64_t{});
    default: throw Error(Where{path}, cat("tokens of type ", megatron_dtype_name(all.dtype), ": expected integer ids"));
  }
}

}  // namespace

TokenTally tally_megatron(const Shard& s) {
  const MegatronReader reader(megatron_prefix(s.path));
  check_records(s, reader.num_sequences(), "sequences");
  TokenTally t;
  t.tokens = reader.num_tokens();
  if (reader.num_sequences() > 0)  // the sequences lie back to back from the first (the reader checked)
    count_megatron_ids({reader.sequence(0).data, size_t(t.tokens), reader.dtype()}, t.id_counts, reader.bin_path(),
                       [](size_t, size_t, int64_t) {});
  const auto lengths = reader.sequence_lengths();
  for (const int32_t n : lengths) t.seq_tokens.add(uint64_t(n));
  t.sequences = lengths.size();
  for (size_t d = 0; d < reader.num_documents(); ++d) {
    const auto [first, last] = reader.document_range(d);
    uint64_t n = 0;
    for (size_t q = first; q < last; ++q) n += uint64_t(lengths[q]);
    t.doc_tokens.add(n);
  }
  t.documents = reader.num_documents();
  return t;
}

TokenTally tally_llmc(const Shard& s, int64_t eot) {
  const LlmcReader reader(s.path);
  check_records(s, reader.size(), "tokens");
  const size_t n = reader.size();
  TokenTally t;
  t.tokens = n;
  std::vector<std::vector<size_t>> ends((n + kPieceTokens - 1) / kPieceTokens);  // each piece's end-of-text positions
  auto at = [&](size_t piece, size_t i, int64_t id) {
    if (id == eot) ends[piece].push_back(i);
  };
  if (reader.format() == LlmcFormat::gpt2) count_ids(reader.tokens16().data(), n, t.id_counts, s.path, at);
  else count_ids(reader.tokens32().data(), n, t.id_counts, s.path, at);
  // Where each document starts: at each end-of-text when the stream opens with one, else after it.
  const bool opens = n > 0 && int64_t(reader[0]) == eot;
  std::vector<size_t> starts;
  if (n > 0) starts.push_back(0);
  for (const std::vector<size_t>& piece : ends)
    for (const size_t i : piece)
      if (opens ? i > 0 : i + 1 < n) starts.push_back(opens ? i : i + 1);
  starts.push_back(n);
  for (size_t d = 0; d + 1 < starts.size(); ++d) t.doc_tokens.add(starts[d + 1] - starts[d]);
  t.documents = t.sequences = starts.size() - 1;
  t.seq_tokens = t.doc_tokens;
  return t;
}

}  // namespace pretrain::shard_stats_internal
