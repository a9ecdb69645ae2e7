#include "datagen/shards/tokenize_documents.h"

#include <algorithm>
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
#include "common/error.h"
#include "common/file.h"
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
  log_info(cat("--resume: the token store holds ", from.documents, " documents (", from.tokens,
               " tokens) from an interrupted run; tokenizing from input document ", from.input_documents));
  uint64_t input_documents = 0;
  for (RawDocument doc; input_documents < from.input_documents; ++input_documents)
    if (!reader.next(doc)) throw Error(Where{store_dir}, "the inputs hold fewer documents than the checkpoint says");
  return input_documents;
}

}  // namespace

void tokenize_documents(const TokenizeOptions& o, const Tokenizer& tok, TextDocumentReader& reader,
                        const std::string& store_dir, const nlohmann::json& key) {
  make_dirs(store_dir);
  const bool gpt = o.model == ModelKind::gpt;
  const TokenId32 eod = gpt ? end_of_document_id(tok) : -1;
  std::optional<SentenceSplitter> splitter_proto;
  if (!gpt) splitter_proto.emplace(o.lang);
  tbb::enumerable_thread_specific<std::optional<SentenceSplitter>> splitters;
  std::optional<TokenStoreWriter::Checkpoint> from;
  if (o.resume) from = TokenStoreWriter::resume_point(store_dir, key);
  TokenStoreWriter writer = from ? TokenStoreWriter(store_dir, *from) : TokenStoreWriter(store_dir);
  uint64_t input_documents = from ? skip_checkpointed(*from, reader, store_dir) : 0;
  Progress progress("tokenize", reader.total_bytes(), Progress::Unit::bytes);
  uint64_t text_since_checkpoint = 0;
  const uint64_t parts = uint64_t(std::max(1, o.parts)), part = uint64_t(o.part);
  uint64_t documents_read = 0;               // the part's: input documents read, its own or not
  std::vector<uint64_t> block_documents;     // the part's: stored documents per local block

  auto read_batch = [&](tbb::flow_control& fc) {
    const size_t max_batch_docs = 256, max_batch_bytes = size_t{4} << 20;
    auto batch = std::make_shared<Batch>();
    size_t bytes = 0;
    RawDocument doc;
    while (batch->docs.size() < max_batch_docs && bytes < max_batch_bytes && reader.next(doc)) {
      if (parts > 1) {
        const uint64_t block = documents_read++ / TokenizeOptions::kPartBlock;
        if (block % parts != part) continue;
        batch->blocks.push_back(block / parts);
      }
      bytes += doc.text.size();
      for (const auto& s : doc.sentences) bytes += s.size();
      batch->docs.push_back(std::move(doc));
    }
    if (batch->docs.empty()) fc.stop();
    batch->text_bytes = bytes;
    batch->end_bytes = reader.bytes_read();
    return batch;
  };
  auto tokenize_batch = [&](std::shared_ptr<Batch> batch) {
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
    return batch;
  };
  auto store_batch = [&](std::shared_ptr<Batch> batch) {
    size_t first_sentence = 0;
    for (size_t i = 0; i < batch->docs.size(); ++i) {
      const size_t end_sentence = batch->document_ends[i];
      const std::span<const uint64_t> ends(batch->sentence_ends.data() + first_sentence, end_sentence - first_sentence);
      const uint64_t begin = first_sentence ? batch->sentence_ends[first_sentence - 1] : 0;
      writer.add_document(std::span<const TokenId32>(batch->tokens).subspan(begin, ends.empty() ? 0 : ends.back() - begin),
                          ends, begin);
      first_sentence = end_sentence;
      if (parts == 1) continue;
      const uint64_t block = batch->blocks[i];
      if (block_documents.size() <= block) block_documents.resize(block + 1, 0);
      block_documents[block] += !ends.empty();  // add_document skips an empty one
    }
    input_documents += batch->docs.size();
    text_since_checkpoint += batch->text_bytes;
    if (text_since_checkpoint >= o.checkpoint_bytes) {
      writer.checkpoint(input_documents, key);
      text_since_checkpoint = 0;
    }
    progress.set(batch->end_bytes);
    progress.set_note(cat(writer.documents(), " documents, ", writer.tokens(), " tokens"));
  };
  tbb::parallel_pipeline(
      size_t(2 * max_threads() + 2),
      tbb::make_filter<void, std::shared_ptr<Batch>>(tbb::filter_mode::serial_in_order, read_batch) &
          tbb::make_filter<std::shared_ptr<Batch>, std::shared_ptr<Batch>>(tbb::filter_mode::parallel, tokenize_batch) &
          tbb::make_filter<std::shared_ptr<Batch>, void>(tbb::filter_mode::serial_in_order, store_batch));
  progress.finish();
  if (parts > 1) write_file_atomic(path_join(store_dir, "block_documents.json"), nlohmann::json(block_documents).dump());
  writer.commit(key);
}

void assemble_token_store(const std::vector<std::string>& part_dirs, const std::string& store_dir,
                          const nlohmann::json& key) {
  struct Part {
    std::unique_ptr<TokenStore> store;
    std::vector<uint64_t> blocks;
    size_t next_document = 0;
  };
  std::vector<Part> parts;
  for (const std::string& dir : part_dirs)
    parts.push_back({std::make_unique<TokenStore>(dir),
                     nlohmann::json::parse(read_file(path_join(dir, "block_documents.json"))).get<std::vector<uint64_t>>()});
  make_dirs(store_dir);
  TokenStoreWriter writer(store_dir);
  std::vector<std::vector<TokenId32>> sentences;
  // Block b of the inputs is block b / parts of part b % parts.
  size_t blocks = 0;
  for (size_t q = 0; q < parts.size(); ++q)
    if (!parts[q].blocks.empty()) blocks = std::max(blocks, (parts[q].blocks.size() - 1) * parts.size() + q + 1);
  for (size_t b = 0; b < blocks; ++b) {
    Part& p = parts[b % parts.size()];
    const size_t local = b / parts.size();
    if (local >= p.blocks.size()) continue;
    for (uint64_t k = 0; k < p.blocks[local]; ++k, ++p.next_document) {
      sentences.resize(p.store->num_sentences(p.next_document));
      for (size_t i = 0; i < sentences.size(); ++i) {
        const auto s = p.store->sentence(p.next_document, i);
        sentences[i].assign(s.begin(), s.end());
      }
      writer.add_document(sentences);
    }
  }
  for (const Part& p : parts)
    if (p.next_document != p.store->num_documents())
      throw Error(Where{store_dir}, "internal: a part of the token store holds documents its blocks do not count");
  writer.commit(key);
}

}  // namespace pretrain
