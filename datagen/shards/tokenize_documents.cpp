#include "datagen/shards/tokenize_documents.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <tbb/enumerable_thread_specific.h>
#include <tbb/parallel_pipeline.h>

#include "common/cli.h"
#include "common/comm_watchdog.h"
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
  uint64_t end_documents = 0;  // input documents read through this batch

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

}  // namespace

uint64_t tokenize_documents(const TokenizeOptions& o, const Tokenizer& tok, TextDocumentReader& reader,
                            const std::string& store_dir, const nlohmann::json& key, Progress* shared_progress) {
  make_dirs(store_dir);
  const bool gpt = o.model == ModelKind::gpt;
  const TokenId32 eod = gpt ? end_of_document_id(tok) : -1;
  std::optional<SentenceSplitter> splitter_proto;
  if (!gpt) splitter_proto.emplace(o.lang);
  tbb::enumerable_thread_specific<std::optional<SentenceSplitter>> splitters;
  const int width = token_store_width(tok.vocab_size());
  std::optional<TokenStoreWriter::Checkpoint> from;
  if (o.resume) from = TokenStoreWriter::resume_point(store_dir, key, width);
  TokenStoreWriter writer = from ? TokenStoreWriter(store_dir, *from, width) : TokenStoreWriter(store_dir, width);
  uint64_t documents_read = from ? skip_checkpointed(*from, reader, store_dir) : 0;
  std::optional<Progress> own_progress;
  if (!shared_progress) own_progress.emplace("tokenize", reader.total_bytes(), Progress::Unit::bytes);
  Progress& progress = shared_progress ? *shared_progress : *own_progress;
  uint64_t bytes_reported = 0;
  uint64_t text_since_checkpoint = 0;
  // A checkpoint falls between batches: a batch no larger than their spacing lets it fall there.
  const size_t max_batch_bytes = size_t(std::clamp<uint64_t>(o.checkpoint_bytes, 1, uint64_t{4} << 20));

  // An error in any stage lets the pipeline drain rather than cancel it (see FirstError).
  FirstError error;
  auto read_batch = [&](tbb::flow_control& fc) {
    const size_t max_batch_docs = 256;
    auto batch = std::make_shared<Batch>();
    size_t bytes = 0;
    error.keep([&] {
      RawDocument doc;
      while (!error.failed() && batch->docs.size() < max_batch_docs && bytes < max_batch_bytes && reader.next(doc)) {
        ++documents_read;
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
    }
    text_since_checkpoint += batch->text_bytes;
    if (text_since_checkpoint >= o.checkpoint_bytes) {
      writer.checkpoint(batch->end_documents, key);
      text_since_checkpoint = 0;
      fault_point("tokenize-checkpoint");  // tests: a rank killed with a checkpoint on disk
    }
    if (batch->end_bytes > bytes_reported) progress.add(batch->end_bytes - bytes_reported), bytes_reported = batch->end_bytes;
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
  if (own_progress) own_progress->finish();
  if (reader.files_skipped())
    log_info(cat(store_dir, ": ", reader.files_skipped(), " input files skipped undecoded (none of their documents wanted)"));
  writer.commit(key);
  return from ? from->input_documents : 0;
}

namespace {

std::string pieces_dir(const std::string& store_dir) { return path_join(dir_name(store_dir), "pieces"); }

// Counts as bytes and back, for all_gather_strings.
std::string to_bytes(const std::vector<TokenStoreCounts>& counts) {
  return {reinterpret_cast<const char*>(counts.data()), counts.size() * sizeof(TokenStoreCounts)};
}
std::vector<TokenStoreCounts> from_bytes(const std::string& bytes) {
  std::vector<TokenStoreCounts> counts(bytes.size() / sizeof(TokenStoreCounts));
  std::memcpy(counts.data(), bytes.data(), counts.size() * sizeof(TokenStoreCounts));
  return counts;
}

// Before tokenizing (rank 0): what earlier runs left that this one does not continue. Without
// --resume that is everything; with it, pieces past this plan's last, and the one-store-per-rank
// parts (store-part-R-of-N) of earlier versions.
void clear_earlier_runs(const std::string& store_dir, size_t pieces, bool resume) {
  namespace fs = std::filesystem;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir_name(store_dir), ec))
    if (e.path().filename().string().starts_with(base_name(store_dir) + "-part-")) fs::remove_all(e.path(), ec);
  if (!resume) {
    fs::remove_all(pieces_dir(store_dir), ec);
    fs::remove_all(store_dir, ec);
    return;
  }
  for (const auto& e : fs::directory_iterator(pieces_dir(store_dir), ec)) {
    const std::string name = e.path().filename().string();
    if (!name.starts_with("piece-") || std::strtoull(name.c_str() + 6, nullptr, 10) >= pieces) fs::remove_all(e.path(), ec);
  }
}

// A collective whose wait is not a stall for a rank that had nothing to tokenize: it waits as
// long as the others take over their pieces (a single piece: the whole input). Unwatched there,
// as --rng python's wait for rank 0 is; the others' waits (at most about a piece) stay watched.
template <typename F>
auto waiting_for_the_others(bool idle, F&& collective) {
  CommWatchdog& watchdog = comm_watchdog();
  const double timeout = watchdog.timeout();
  if (idle) watchdog.set_timeout(0);
  auto restore = [&] { watchdog.set_timeout(timeout); };
  try {
    auto result = collective();
    restore();
    return result;
  } catch (...) {
    restore();
    throw;
  }
}

}  // namespace

std::string piece_dir(const std::string& store_dir, size_t index) {
  char name[32];
  std::snprintf(name, sizeof name, "piece-%05zu", index);
  return path_join(pieces_dir(store_dir), name);
}

nlohmann::json piece_key(const nlohmann::json& store_key, size_t index, const InputPiece& piece) {
  nlohmann::json key = store_key;
  key["piece"] = {{"index", index}, {"range", piece.to_json()}};
  return key;
}

void tokenize_in_pieces(const TokenizeOptions& o, const Tokenizer& tok, const std::vector<std::string>& inputs,
                        const std::string& store_dir, const nlohmann::json& key, const Communicator& ranks) {
  TextDocumentReader whole(inputs);
  const std::vector<InputPiece> pieces = plan_input_pieces(whole.units(), o.piece_bytes);
  const int width = token_store_width(tok.vocab_size());
  if (ranks.rank() == 0) clear_earlier_runs(store_dir, pieces.size(), o.resume);
  ranks.barrier();
  const auto [first, end] = pieces_of_rank(pieces, ranks.rank(), ranks.size());
  const bool idle = first == end;
  if (ranks.rank() == 0 && ranks.size() > 1 && pieces.size() < size_t(ranks.size()))
    log_info(cat("the input is ", pieces.size(), " piece(s) for ", ranks.size(),
                 " ranks, so some have nothing to tokenize (a file is cut only when a manifest counts its documents: "
                 "shard-tool import-docs makes such shards)"));
  if (pieces.size() <= 1) {  // the one piece is the store
    if (!idle) tokenize_documents(o, tok, whole, store_dir, key);
    waiting_for_the_others(idle, [&] { return ranks.barrier(), 0; });
    return;
  }
  // A join a killed run began: every piece was done then, and those gone are in the store.
  std::optional<std::vector<TokenStoreCounts>> joined;
  uint8_t joining = ranks.rank() == 0 && o.resume && TokenStoreJoin::begun(store_dir, key).has_value();
  ranks.broadcast(&joining, 1, 0);
  if (joining) joined = TokenStoreJoin::begun(store_dir, key);
  if (joining && !joined) throw Error(Where{store_dir}, "the join of the token store's pieces changed under this run");
  uint64_t my_bytes = 0;
  for (size_t p = first; p < end; ++p) my_bytes += pieces[p].bytes;
  uint64_t done = 0, continued = 0, started = 0;  // this rank's pieces, by how they were found
  std::vector<TokenStoreCounts> mine;
  if (!joined) {
    Progress progress("tokenize", my_bytes, Progress::Unit::bytes);
    for (size_t p = first; p < end; ++p) {
      const std::string dir = piece_dir(store_dir, p);
      const nlohmann::json pkey = piece_key(key, p, pieces[p]);
      if (o.resume && TokenStoreJoin::piece_counts(dir, pkey)) {
        ++done;
        progress.add(pieces[p].bytes);
      } else {
        TextDocumentReader reader(inputs);
        reader.set_range(pieces[p].begin, pieces[p].end);
        (tokenize_documents(o, tok, reader, dir, pkey, &progress) ? continued : started)++;
      }
      const auto counts = TokenStoreJoin::piece_counts(dir, pkey);
      if (!counts) throw Error(Where{dir}, "internal: a tokenized piece is not committed");
      mine.push_back(*counts);
    }
    progress.finish();
  }
  // Every piece's counts in input order (rank r's run follows rank r − 1's), after how this
  // rank's pieces were found.
  std::vector<TokenStoreCounts> sent{{done, continued, started}};
  sent.insert(sent.end(), mine.begin(), mine.end());
  const std::vector<std::string> gathered =
      waiting_for_the_others(idle, [&] { return ranks.all_gather_strings(to_bytes(sent)); });
  std::vector<TokenStoreCounts> counts = joined.value_or(std::vector<TokenStoreCounts>{});
  TokenStoreCounts found;  // pieces done, continued, started
  for (const std::string& g : gathered) {
    const std::vector<TokenStoreCounts> theirs = from_bytes(g);
    found += theirs.at(0);
    counts.insert(counts.end(), theirs.begin() + 1, theirs.end());
  }
  if (counts.size() != pieces.size())
    throw Error(cat("internal: ", counts.size(), " of the token store's ", pieces.size(), " pieces counted"));
  if (o.resume && ranks.rank() == 0)
    log_info(joined ? cat("--resume: the token store's ", pieces.size(), " pieces were being joined; joining the rest")
                    : cat("--resume: the token store's ", pieces.size(), " pieces: ", found.documents, " done before, ",
                          found.sentences, " continued from a checkpoint, ", found.tokens, " tokenized from the start"));
  if (!joined && ranks.rank() == 0) TokenStoreJoin::begin(store_dir, counts, width, key);
  ranks.barrier();
  // Each rank holds a chunk of its piece twice while it moves it: about 1/32 of the store in all.
  TokenStoreCounts at;
  for (const TokenStoreCounts& c : counts) at += c;
  const uint64_t chunk = std::min(o.move_chunk_bytes, std::max(at.tokens * uint64_t(width) / 32 / uint64_t(ranks.size()),
                                                               uint64_t{1} << 20));
  at = TokenStoreCounts{};
  for (size_t p = 0; p < pieces.size(); ++p) {
    if (p >= first && p < end) {
      const std::string dir = piece_dir(store_dir, p);
      if (file_exists(dir)) {
        if (TokenStoreJoin::piece_counts(dir, piece_key(key, p, pieces[p])) != counts[p])
          throw Error(Where{dir}, "this piece of the token store is not the one the join counted; run again without --resume");
        TokenStoreJoin::move_piece(store_dir, dir, at, chunk);
      } else if (!joined) {
        throw Error(Where{dir}, "internal: a piece of the token store is gone before the join");
      }
    }
    at += counts[p];
  }
  ranks.barrier();  // every piece is in the store
  if (ranks.rank() == 0) {
    TokenStoreJoin::commit(store_dir, at, width, key);
    std::error_code ec;
    std::filesystem::remove_all(pieces_dir(store_dir), ec);
  }
  ranks.barrier();
}

}  // namespace pretrain
