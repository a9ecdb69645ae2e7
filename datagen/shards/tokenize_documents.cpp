#include "datagen/shards/tokenize_documents.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <tbb/enumerable_thread_specific.h>
#include <tbb/parallel_pipeline.h>

#include "common/cli.h"
#include "common/communicator.h"
#include "common/error.h"
#include "common/file.h"
#include "common/json_integer.h"
#include "common/log.h"
#include "common/progress.h"
#include "datagen/shards/token_store.h"
#include "tokenizer/sentences.h"

namespace pretrain {

nlohmann::json token_store_key(const TokenizeOptions& o, const Tokenizer& tok, const TextDocumentReader& reader) {
  nlohmann::json inputs = nlohmann::json::array();
  namespace fs = std::filesystem;
  for (const auto& u : reader.units()) {
    std::error_code ec;
    auto mtime = fs::last_write_time(u.path, ec).time_since_epoch().count();
    inputs.push_back({u.path, fs::is_directory(u.path, ec) ? 0 : file_size(u.path), int64_t(mtime)});
  }
  return {{"inputs", inputs},
          {"model", model_kind_name(o.model)},
          {"lang", o.lang},
          {"tokenizer", tok.info().vocab_hash},
          {"lowercase", o.tokenizer_options.lowercase ? int(*o.tokenizer_options.lowercase) : -1},
          {"python_compat", o.tokenizer_options.python_compat},
          {"max_chars", o.tokenizer_options.max_input_chars_per_word}};
}

TokenId32 end_of_document_id(const Tokenizer& tok) {
  auto ids = tok.special_ids();
  for (const char* role : {"eod", "eos", "sep"})
    if (auto it = ids.find(role); it != ids.end()) return it->second;
  throw UsageError(Where{tok.source()}, "the tokenizer has no end-of-document token (eod, eos or [SEP]) for GPT data");
}

namespace {

// Documents read and tokenized together: the pipeline's unit of work. The batch's tokens lie in
// one buffer (no vector per sentence: this runs for every sentence of the corpus).
struct Batch {
  std::vector<RawDocument> docs;
  std::vector<TokenId32> tokens;       // every sentence's ids, back to back
  std::vector<uint64_t> sentence_ends;  // end of each non-empty sentence in `tokens`
  std::vector<size_t> document_ends;    // end of each document in `sentence_ends`
  uint64_t text_bytes = 0;  // of the documents' text, which spaces the checkpoints
  uint64_t end_bytes = 0;   // input bytes read through this batch (read here, not from the reader,
                            // which the input stage is advancing on another thread)
  uint64_t end_documents = 0;  // input documents read through this batch, a part's or not
  std::vector<uint64_t> blocks;  // a part's: each document's block, local to the part

  // Ends the sentence begun at `begin` in `tokens`; an empty one is dropped (the Python script
  // drops sentences without tokens).
  void end_sentence(size_t begin) {
    if (tokens.size() > begin) sentence_ends.push_back(tokens.size());
  }
};

// A run that continues from the last checkpoint of an interrupted one reads that run's input
// documents again, to find where to go on, but does not tokenize them. Returns how many it read.
uint64_t skip_checkpointed(const TokenStoreWriter::Checkpoint& from, TextDocumentReader& reader,
                           const std::string& store_dir) {
  log_info(cat("--resume: ", store_dir, " holds ", from.documents, " documents (", from.tokens,
               " tokens) from an interrupted run; tokenizing from input document ", from.input_documents));
  uint64_t input_documents = reader.skip_files_before(from.input_documents);  // whole files undecoded
  for (RawDocument doc; input_documents < from.input_documents; ++input_documents)
    if (!reader.next(doc)) throw Error(Where{store_dir}, "the inputs hold fewer documents than the checkpoint says");
  return input_documents;
}

// A part's blocks.bin: how many stored documents each of its blocks gave, a block's count written
// once the part reads past it. What a checkpoint must add to the store's own (the written
// blocks, the open block's count so far) goes in progress.json's extra.
class PartBlocks {
 public:
  // New, or continuing a checkpoint's `extra` (when can_resume() says it can).
  PartBlocks(const std::string& store_dir, const nlohmann::json& extra)
      : written_(extra.is_null() ? 0 : json_integer<uint64_t>(extra.at("blocks"))),
        file_(AtomicFile::resumable(path_join(store_dir, "blocks.bin"), written_ * 8)) {
    if (!extra.is_null() && !extra.at("open").is_null()) open_ = json_integer<uint64_t>(extra.at("open"));
  }
  // Whether a checkpoint's extra can be continued: blocks.bin.partial still holds its blocks.
  static bool can_resume(const std::string& store_dir, const nlohmann::json& extra) {
    const std::string path = path_join(store_dir, "blocks.bin.partial");
    try {
      return extra.is_object() && file_exists(path) && file_size(path) >= json_integer<uint64_t>(extra.at("blocks")) * 8;
    } catch (const std::exception&) {
      return false;
    }
  }
  // A document of local block `block` (blocks come in order), stored or dropped as empty.
  void add(uint64_t block, bool stored) {
    if (open_ && block != written_) close_block();
    while (written_ < block) file_.write_pod(uint64_t{0}), ++written_;  // a block with no document: never, but cheap
    open_ = open_.value_or(0) + (stored ? 1 : 0);
  }
  nlohmann::json checkpoint() {
    file_.flush();
    return {{"blocks", written_}, {"open", open_ ? nlohmann::json(*open_) : nlohmann::json()}};
  }
  void commit() {
    if (open_) close_block();
    file_.commit();
  }

 private:
  void close_block() {
    file_.write_pod(*open_);
    ++written_;
    open_.reset();
  }
  uint64_t written_;
  AtomicFile file_;
  std::optional<uint64_t> open_;  // the stored documents of block written_, once it has begun
};

}  // namespace

uint64_t tokenize_documents(const TokenizeOptions& o, const Tokenizer& tok, TextDocumentReader& reader,
                        const std::string& store_dir, const nlohmann::json& key) {
  make_dirs(store_dir);
  const bool gpt = o.model == ModelKind::gpt;
  const TokenId32 eod = gpt ? end_of_document_id(tok) : -1;
  std::optional<SentenceSplitter> splitter_proto;
  if (!gpt) splitter_proto.emplace(o.lang);
  tbb::enumerable_thread_specific<std::optional<SentenceSplitter>> splitters;
  const uint64_t parts = uint64_t(std::max(1, o.parts)), part = uint64_t(o.part);
  std::optional<TokenStoreWriter::Checkpoint> from;
  if (o.resume) from = TokenStoreWriter::resume_point(store_dir, key);
  if (from && parts > 1 && !PartBlocks::can_resume(store_dir, from->extra)) from.reset();
  TokenStoreWriter writer = from ? TokenStoreWriter(store_dir, *from) : TokenStoreWriter(store_dir);
  std::optional<PartBlocks> blocks;
  if (parts > 1) blocks.emplace(store_dir, from ? from->extra : nlohmann::json());
  uint64_t documents_read = from ? skip_checkpointed(*from, reader, store_dir) : 0;  // input documents, a part's or not
  Progress progress("tokenize", reader.total_bytes(), Progress::Unit::bytes);
  uint64_t text_since_checkpoint = 0;
  // A checkpoint falls between batches: a batch no larger than their spacing lets it fall there.
  const size_t max_batch_bytes = size_t(std::clamp<uint64_t>(o.checkpoint_bytes, 1, uint64_t{4} << 20));

  // The next input document; a part first skips the whole files before its next block, undecoded.
  auto next_input = [&](RawDocument& doc) {
    if (parts > 1) {
      const uint64_t block = documents_read / TokenizeOptions::kPartBlock, ahead = (part + parts - block % parts) % parts;
      if (ahead) documents_read += reader.skip_files_before((block + ahead) * TokenizeOptions::kPartBlock);
    }
    return reader.next(doc);
  };
  // An error in any stage lets the pipeline drain rather than cancel it (see FirstError).
  FirstError error;
  auto read_batch = [&](tbb::flow_control& fc) {
    const size_t max_batch_docs = 256;
    auto batch = std::make_shared<Batch>();
    size_t bytes = 0;
    error.keep([&] {
      RawDocument doc;
      while (!error.failed() && batch->docs.size() < max_batch_docs && bytes < max_batch_bytes && next_input(doc)) {
        const uint64_t block = documents_read++ / TokenizeOptions::kPartBlock;
        if (parts > 1) {
          if (block % parts != part) continue;
          batch->blocks.push_back(block / parts);
        }
        bytes += doc.text.size();
        for (const auto& s : doc.sentences) bytes += s.size();
        batch->docs.push_back(std::move(doc));
      }
    });
    if (batch->docs.empty() || error.failed()) fc.stop();
    batch->text_bytes = bytes;
    batch->end_bytes = reader.bytes_read();
    batch->end_documents = documents_read;
    return batch;
  };
  auto tokenize = [&](Batch* batch) {
    batch->document_ends.reserve(batch->docs.size());
    std::string text;  // GPT: the document's text; BERT: its sentences, one per line
    for (RawDocument& doc : batch->docs) {
      if (gpt) {
        // The whole text, as Megatron's preprocess_data.py encodes a JSON document.
        text = doc.presplit ? std::string() : std::move(doc.text);
        for (size_t k = 0; k < doc.sentences.size(); ++k) text += (k ? "\n" : "") + doc.sentences[k];
        const size_t begin = batch->tokens.size();
        tok.encode_into(text, batch->tokens);
        if (batch->tokens.size() > begin) batch->tokens.push_back(eod);
        batch->end_sentence(begin);
      } else if (doc.presplit) {
        for (const auto& sentence : doc.sentences) {
          const size_t begin = batch->tokens.size();
          tok.encode_into(sentence, batch->tokens);
          batch->end_sentence(begin);
        }
      } else {
        auto& local = splitters.local();
        if (!local) local.emplace(*splitter_proto);
        text.clear();
        local->append_lines(doc.text, text);
        for (std::string_view rest = text; !rest.empty();) {
          const size_t eol = rest.find('\n');
          const size_t begin = batch->tokens.size();
          tok.encode_into(rest.substr(0, eol), batch->tokens);
          batch->end_sentence(begin);
          rest.remove_prefix(eol + 1);
        }
      }
      batch->document_ends.push_back(batch->sentence_ends.size());
    }
  };
  auto tokenize_batch = [&](std::shared_ptr<Batch> batch) {
    if (!error.failed()) error.keep([&] { tokenize(batch.get()); });
    return batch;
  };
  auto store = [&](const Batch* batch) {
    size_t first_sentence = 0;
    for (size_t i = 0; i < batch->docs.size(); ++i) {
      const size_t end_sentence = batch->document_ends[i];
      const std::span<const uint64_t> ends(batch->sentence_ends.data() + first_sentence, end_sentence - first_sentence);
      const uint64_t begin = first_sentence ? batch->sentence_ends[first_sentence - 1] : 0;
      writer.add_document(std::span<const TokenId32>(batch->tokens).subspan(begin, ends.empty() ? 0 : ends.back() - begin),
                          ends, begin);
      first_sentence = end_sentence;
      if (blocks) blocks->add(batch->blocks[i], !ends.empty());  // add_document skips an empty one
    }
    text_since_checkpoint += batch->text_bytes;
    if (text_since_checkpoint >= o.checkpoint_bytes) {
      writer.checkpoint(batch->end_documents, key, blocks ? blocks->checkpoint() : nlohmann::json());
      text_since_checkpoint = 0;
      fault_point("tokenize-checkpoint");  // tests: a rank killed with a checkpoint on disk
    }
    progress.set(batch->end_bytes);
    progress.set_note(cat(writer.documents(), " documents, ", writer.tokens(), " tokens"));
  };
  auto store_batch = [&](std::shared_ptr<Batch> batch) {
    if (!error.failed()) error.keep([&] { store(batch.get()); });
  };
  tbb::parallel_pipeline(
      size_t(2 * max_threads() + 2),
      tbb::make_filter<void, std::shared_ptr<Batch>>(tbb::filter_mode::serial_in_order, read_batch) &
          tbb::make_filter<std::shared_ptr<Batch>, std::shared_ptr<Batch>>(tbb::filter_mode::parallel, tokenize_batch) &
          tbb::make_filter<std::shared_ptr<Batch>, void>(tbb::filter_mode::serial_in_order, store_batch));
  error.rethrow();
  progress.finish();
  if (reader.files_skipped())
    log_info(cat(store_dir, ": ", reader.files_skipped(), " input files skipped undecoded (none of their documents wanted)"));
  writer.commit(key);
  if (blocks) blocks->commit();  // after the store: a part is done when both are (part_done)
  return from ? from->input_documents : 0;
}

namespace {

std::string part_dir_of(const std::string& store_dir, int part, int parts) {
  return cat(store_dir, "-part-", part, "-of-", parts);
}

bool part_done(const std::string& part_dir, const nlohmann::json& part_key) {
  return TokenStore::complete(part_dir, part_key) && file_exists(path_join(part_dir, "blocks.bin"));
}

// Block counts as bytes and back, for all_gather_strings.
std::string to_bytes(const std::vector<TokenStoreCounts>& counts) {
  return {reinterpret_cast<const char*>(counts.data()), counts.size() * sizeof(TokenStoreCounts)};
}
std::vector<TokenStoreCounts> from_bytes(const std::string& bytes) {
  std::vector<TokenStoreCounts> counts(bytes.size() / sizeof(TokenStoreCounts));
  std::memcpy(counts.data(), bytes.data(), counts.size() * sizeof(TokenStoreCounts));
  return counts;
}

}  // namespace

void forget_other_parts(const std::string& store_dir, int parts, bool resume) {
  namespace fs = std::filesystem;
  const std::string prefix = base_name(store_dir) + "-part-", ours = cat("-of-", parts);
  std::set<std::string> counts;  // of the ranks that left parts
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir_name(store_dir), ec)) {
    const std::string name = entry.path().filename().string();
    if (!name.starts_with(prefix) || (parts > 1 && name.ends_with(ours))) continue;
    counts.insert(name.substr(name.rfind("-of-") + 4));
    fs::remove_all(entry.path(), ec);
  }
  const std::string here = parts > 1 ? cat("under ", parts, " ranks") : "in one process";
  for (const std::string& n : counts)
    if (resume)
      log_info(cat("--resume: ", store_dir, "-part-*-of-", n, " is an interrupted tokenizing under ", n, " ranks; ",
                   here, " tokenizing starts over"));
  if (resume && parts > 1 && file_exists(path_join(store_dir, "progress.json")))
    log_info(cat("--resume: ", store_dir, " is an interrupted tokenizing in one process; ", here,
                 " tokenizing starts over"));
}

std::vector<TokenStoreCounts> part_block_counts(const TokenStore& part, const std::string& part_dir) {
  const std::string path = path_join(part_dir, "blocks.bin");
  const std::string bytes = read_file(path);
  if (bytes.size() % 8) throw Error(Where{path}, "expected a whole number of 8-byte counts");
  std::vector<TokenStoreCounts> counts(bytes.size() / 8);
  uint64_t document = 0;
  for (size_t l = 0; l < counts.size(); ++l) {
    uint64_t n;
    std::memcpy(&n, bytes.data() + 8 * l, 8);
    if (n > part.num_documents() - document)
      throw Error(Where::at_record(path, int64_t(l)), cat("the blocks count more documents than the part's ",
                                                          part.num_documents()));
    counts[l] = part.counts_before(document + n) - part.counts_before(document);
    document += n;
  }
  if (document != part.num_documents())
    throw Error(Where{path}, cat("the blocks count ", document, " documents; the part holds ", part.num_documents()));
  return counts;
}

std::vector<TokenStoreCounts> part_block_offsets(const std::vector<std::vector<TokenStoreCounts>>& blocks, size_t part) {
  // Input block b is local block b / parts of part b % parts; the parts' lengths differ by at most one.
  const size_t parts = blocks.size();
  size_t total_blocks = 0;
  for (const auto& b : blocks) total_blocks += b.size();
  std::vector<TokenStoreCounts> offsets;
  TokenStoreCounts at;
  for (size_t b = 0; b < total_blocks; ++b) {
    const auto& owner = blocks[b % parts];
    if (b / parts >= owner.size()) throw Error(cat("internal: input block ", b, " is missing from part ", b % parts));
    if (b % parts == part) offsets.push_back(at);
    at += owner[b / parts];
  }
  offsets.push_back(at);
  return offsets;
}

void write_part_blocks(const TokenStore& part, const std::vector<TokenStoreCounts>& blocks,
                       const std::vector<TokenStoreCounts>& offsets, TokenStorePieces& out) {
  size_t document = 0;
  for (size_t l = 0; l < blocks.size(); ++l) {
    out.write(part, document, blocks[l].documents, offsets[l]);
    document += blocks[l].documents;
  }
}

namespace {

// The parts' blocks into the one store, each rank writing its own (TokenStorePieces), once every
// rank knows every block's counts; rank 0 commits it.
void write_store_together(const std::string& part_dir, const std::string& store_dir, const nlohmann::json& key,
                          const Communicator& ranks) {
  const TokenStore store(part_dir);
  const std::vector<TokenStoreCounts> mine = part_block_counts(store, part_dir);
  std::vector<std::vector<TokenStoreCounts>> all;
  for (const std::string& bytes : ranks.all_gather_strings(to_bytes(mine))) all.push_back(from_bytes(bytes));
  const std::vector<TokenStoreCounts> offsets = part_block_offsets(all, size_t(ranks.rank()));
  if (ranks.rank() == 0) TokenStorePieces::create(store_dir, offsets.back());
  ranks.barrier();
  TokenStorePieces out(store_dir);
  write_part_blocks(store, mine, offsets, out);
  out.finish();
  ranks.barrier();  // every rank's blocks are on disk
  if (ranks.rank() == 0) TokenStoreWriter(store_dir, offsets.back()).commit(key);
}

}  // namespace

void tokenize_in_parts(const TokenizeOptions& o, const Tokenizer& tok, TextDocumentReader& reader,
                       const std::string& store_dir, const nlohmann::json& key, const Communicator& ranks) {
  const int rank = ranks.rank();
  TokenizeOptions part = o;
  part.part = rank;
  part.parts = ranks.size();
  nlohmann::json part_key = key;
  part_key["part"] = {rank, ranks.size()};
  const std::string part_dir = part_dir_of(store_dir, rank, ranks.size());
  if (rank == 0) forget_other_parts(store_dir, ranks.size(), o.resume);  // no rank of this N reads those
  std::string resumed = "done";
  if (!o.resume || !part_done(part_dir, part_key)) {
    const uint64_t from = tokenize_documents(part, tok, reader, part_dir, part_key);
    resumed = from ? cat("from input document ", from) : "from the start";
  }
  const std::vector<std::string> all_resumed = ranks.all_gather_strings(resumed);
  if (o.resume && rank == 0) {  // the other ranks log warnings only
    std::string line = "--resume: the ranks' parts of the token store:";
    for (size_t r = 0; r < all_resumed.size(); ++r) line += cat(r ? "," : "", " rank ", r, " ", all_resumed[r]);
    log_info(line);
  }
  write_store_together(part_dir, store_dir, key, ranks);
  ranks.barrier();  // the store is committed: the parts are of no more use
  std::filesystem::remove_all(part_dir);
}

}  // namespace pretrain
