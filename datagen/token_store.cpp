#include "datagen/token_store.h"

#include <cstdio>

#include "common/error.h"

namespace pretrain {

namespace {
std::string progress_path(const std::string& dir) { return path_join(dir, "progress.json"); }
}  // namespace

TokenStoreWriter::TokenStoreWriter(const std::string& dir) : TokenStoreWriter(dir, Checkpoint{}) {
  std::remove(progress_path(dir).c_str());  // a checkpoint of another run must not describe these files
}

TokenStoreWriter::TokenStoreWriter(const std::string& dir, const Checkpoint& from)
    : dir_(dir),
      tokens_file_(AtomicFile::resumable(path_join(dir, "tokens.bin"), from.tokens * sizeof(TokenId32))),
      sentences_file_(AtomicFile::resumable(path_join(dir, "sentences.bin"), from.sentences * 8)),
      documents_file_(AtomicFile::resumable(path_join(dir, "documents.bin"), from.documents * 8)),
      documents_(from.documents),
      sentences_(from.sentences),
      tokens_(from.tokens) {}

std::optional<TokenStoreWriter::Checkpoint> TokenStoreWriter::resume_point(const std::string& dir,
                                                                           const nlohmann::json& key) {
  if (!file_exists(progress_path(dir))) return std::nullopt;
  try {
    nlohmann::json p = nlohmann::json::parse(read_file(progress_path(dir)));
    if (p.at("key") != key) return std::nullopt;
    Checkpoint c{p.at("documents").get<uint64_t>(), p.at("sentences").get<uint64_t>(), p.at("tokens").get<uint64_t>(),
                 p.at("input_documents").get<uint64_t>()};
    auto holds = [&](const char* name, uint64_t bytes) {
      const std::string path = path_join(dir, std::string(name) + ".partial");
      return file_exists(path) && file_size(path) >= bytes;
    };
    if (!holds("tokens.bin", c.tokens * sizeof(TokenId32)) || !holds("sentences.bin", c.sentences * 8) ||
        !holds("documents.bin", c.documents * 8))
      return std::nullopt;
    return c;
  } catch (const std::exception&) {
    return std::nullopt;  // damaged: tokenize from the start
  }
}

void TokenStoreWriter::checkpoint(uint64_t input_documents, const nlohmann::json& key) {
  tokens_file_.flush();
  sentences_file_.flush();
  documents_file_.flush();
  nlohmann::json p = {{"key", key},         {"documents", documents_}, {"sentences", sentences_},
                      {"tokens", tokens_},  {"input_documents", input_documents}};
  write_file_atomic(progress_path(dir_), p.dump() + "\n");
}

void TokenStoreWriter::add_document(const std::vector<std::vector<TokenId32>>& sentences) {
  uint64_t kept = 0;
  for (const auto& s : sentences) {
    if (s.empty()) continue;
    tokens_file_.write(s.data(), s.size() * sizeof(TokenId32));
    tokens_ += s.size();
    sentences_file_.write_pod(tokens_);
    ++kept;
  }
  if (kept == 0) return;
  sentences_ += kept;
  documents_file_.write_pod(sentences_);
  ++documents_;
}

void TokenStoreWriter::commit(const nlohmann::json& key) {
  tokens_file_.commit();
  sentences_file_.commit();
  documents_file_.commit();
  nlohmann::json meta = {{"key", key}, {"documents", documents_}, {"sentences", sentences_}, {"tokens", tokens_}};
  write_file_atomic(path_join(dir_, "store.json"), meta.dump(2) + "\n");
  std::remove(progress_path(dir_).c_str());
}

bool TokenStore::complete(const std::string& dir, const nlohmann::json& key) {
  const std::string meta_path = path_join(dir, "store.json");
  if (!file_exists(meta_path)) return false;
  try {
    nlohmann::json meta = nlohmann::json::parse(read_file(meta_path));
    return meta.at("key") == key &&
           file_size(path_join(dir, "tokens.bin")) == meta.at("tokens").get<uint64_t>() * sizeof(TokenId32) &&
           file_size(path_join(dir, "sentences.bin")) == meta.at("sentences").get<uint64_t>() * 8 &&
           file_size(path_join(dir, "documents.bin")) == meta.at("documents").get<uint64_t>() * 8;
  } catch (const std::exception&) {
    return false;  // damaged or partial: the stage runs again
  }
}

TokenStore::TokenStore(const std::string& dir, uint64_t resident_budget)
    : tokens_file_(path_join(dir, "tokens.bin")),
      sentences_file_(path_join(dir, "sentences.bin")),
      documents_file_(path_join(dir, "documents.bin")),
      resident_budget_(resident_budget),
      token_regions_(tokens_file_.size()),
      sentence_regions_(sentences_file_.size()) {
  tokens_ = {reinterpret_cast<const TokenId32*>(tokens_file_.data()), tokens_file_.size() / sizeof(TokenId32)};
  sentence_ends_ = {reinterpret_cast<const uint64_t*>(sentences_file_.data()), sentences_file_.size() / 8};
  documents_ = {reinterpret_cast<const uint64_t*>(documents_file_.data()), documents_file_.size() / 8};
  // The ends must rise and stay inside the arrays they index, or reads would leave the maps.
  uint64_t prev = 0;
  for (size_t i = 0; i < sentence_ends_.size(); ++i) {
    if (sentence_ends_[i] <= prev && i) throw Error(Where::at_record(sentences_file_.path(), int64_t(i)), "sentence ends must rise");
    prev = sentence_ends_[i];
  }
  if (prev > tokens_.size()) throw Error(Where{sentences_file_.path()}, "sentence ends past the token file");
  prev = 0;
  for (size_t i = 0; i < documents_.size(); ++i) {
    if (documents_[i] <= prev && i) throw Error(Where::at_record(documents_file_.path(), int64_t(i)), "document ends must rise");
    prev = documents_[i];
  }
  if (prev > sentence_ends_.size()) throw Error(Where{documents_file_.path()}, "document ends past the sentence file");
  release_pages();  // the checks above touched every sentence end
}

TokenStore::Regions::Regions(uint64_t bytes)
    : bits(new std::atomic<uint64_t>[(bytes >> kRegionShift) / 64 + 1]()), words((bytes >> kRegionShift) / 64 + 1) {}

uint64_t TokenStore::Regions::mark(uint64_t first_byte, uint64_t end_byte) {
  uint64_t added = 0;
  for (uint64_t r = first_byte >> kRegionShift; r <= (end_byte - 1) >> kRegionShift; ++r) {
    std::atomic<uint64_t>& word = bits[r / 64];
    const uint64_t bit = uint64_t{1} << (r % 64);
    if (!(word.load(std::memory_order_relaxed) & bit) && !(word.fetch_or(bit, std::memory_order_relaxed) & bit))
      added += uint64_t{1} << kRegionShift;
  }
  return added;
}

void TokenStore::Regions::clear() {
  for (size_t i = 0; i < words; ++i) bits[i].store(0, std::memory_order_relaxed);
}

void TokenStore::release_pages() const {
  tokens_file_.release_pages();
  sentences_file_.release_pages();
  token_regions_.clear();
  sentence_regions_.clear();
}

void TokenStore::touch(uint64_t begin, uint64_t end, uint64_t s) const {
  uint64_t added = sentence_regions_.mark(s * sizeof(uint64_t), (s + 1) * sizeof(uint64_t));
  if (end > begin) added += token_regions_.mark(begin * sizeof(TokenId32), end * sizeof(TokenId32));
  if (added == 0 || touched_.fetch_add(added, std::memory_order_relaxed) + added < resident_budget_) return;
  if (touched_.exchange(0, std::memory_order_relaxed) >= resident_budget_) release_pages();  // one thread releases
}

std::span<const TokenId32> TokenStore::sentence(size_t d, size_t i) const {
  const size_t s = document_begin(d) + i;
  const uint64_t b = sentence_begin(s);
  touch(b, sentence_ends_[s], s);
  return tokens_.subspan(b, sentence_ends_[s] - b);
}

std::span<const TokenId32> TokenStore::document_tokens(size_t d) const {
  const uint64_t b = sentence_begin(document_begin(d));
  const uint64_t e = sentence_ends_[document_end(d) - 1];
  touch(b, e, document_end(d) - 1);
  return tokens_.subspan(b, e - b);
}

}  // namespace pretrain
