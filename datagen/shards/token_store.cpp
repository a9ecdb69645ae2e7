#include "datagen/shards/token_store.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>

#include "common/error.h"
#include "common/json_integer.h"

namespace pretrain {

namespace {
std::string progress_path(const std::string& dir) { return path_join(dir, "progress.json"); }
}  // namespace

TokenStoreWriter::TokenStoreWriter(const std::string& dir) : TokenStoreWriter(dir, TokenStoreCounts{}) {
  std::remove(progress_path(dir).c_str());  // a checkpoint of another run must not describe these files
}

TokenStoreWriter::TokenStoreWriter(const std::string& dir, const TokenStoreCounts& from)
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
    Checkpoint c;
    c.documents = json_integer<uint64_t>(p.at("documents"));
    c.sentences = json_integer<uint64_t>(p.at("sentences"));
    c.tokens = json_integer<uint64_t>(p.at("tokens"));
    c.input_documents = json_integer<uint64_t>(p.at("input_documents"));
    c.extra = p.value("extra", nlohmann::json());
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

void TokenStoreWriter::checkpoint(uint64_t input_documents, const nlohmann::json& key, const nlohmann::json& extra) {
  tokens_file_.flush();
  sentences_file_.flush();
  documents_file_.flush();
  nlohmann::json p = {{"key", key},         {"documents", documents_}, {"sentences", sentences_},
                      {"tokens", tokens_},  {"input_documents", input_documents}};
  if (!extra.is_null()) p["extra"] = extra;
  write_file_atomic(progress_path(dir_), p.dump() + "\n");
}

void TokenStoreWriter::add_document(const std::vector<std::vector<TokenId32>>& sentences) {
  std::vector<TokenId32> tokens;
  std::vector<uint64_t> ends;
  for (const auto& s : sentences) {
    if (s.empty()) continue;
    tokens.insert(tokens.end(), s.begin(), s.end());
    ends.push_back(tokens.size());
  }
  add_document(tokens, ends, 0);
}

void TokenStoreWriter::add_document(std::span<const TokenId32> tokens, std::span<const uint64_t> ends, uint64_t base) {
  if (ends.empty()) return;
  tokens_file_.write(tokens.data(), tokens.size() * sizeof(TokenId32));
  for (uint64_t end : ends) sentences_file_.write_pod(tokens_ + (end - base));
  tokens_ += tokens.size();
  sentences_ += ends.size();
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
           file_size(path_join(dir, "tokens.bin")) == json_integer<uint64_t>(meta.at("tokens")) * sizeof(TokenId32) &&
           file_size(path_join(dir, "sentences.bin")) == json_integer<uint64_t>(meta.at("sentences")) * 8 &&
           file_size(path_join(dir, "documents.bin")) == json_integer<uint64_t>(meta.at("documents")) * 8;
  } catch (const std::exception&) {
    return false;  // damaged or partial: the stage runs again
  }
}

namespace {
std::atomic<uint64_t> next_store_id{1};
}  // namespace

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
  id_ = next_store_id.fetch_add(1);
  tokens_fd_ = ::open(tokens_file_.path().c_str(), O_RDONLY | O_CLOEXEC);
  sentences_fd_ = ::open(sentences_file_.path().c_str(), O_RDONLY | O_CLOEXEC);
  if (tokens_fd_ < 0 || sentences_fd_ < 0) {
    if (tokens_fd_ >= 0) ::close(tokens_fd_);
    throw_errno("cannot open", tokens_fd_ < 0 ? tokens_file_.path() : sentences_file_.path());
  }
}

TokenStore::~TokenStore() {
  ::close(tokens_fd_);
  ::close(sentences_fd_);
}

namespace {
void pread_all(int fd, void* out, size_t bytes, uint64_t offset, const std::string& path) {
  char* p = static_cast<char*>(out);
  while (bytes) {
    ssize_t got = ::pread(fd, p, bytes, static_cast<off_t>(offset));
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) throw_errno("cannot read", path);
    p += got, bytes -= static_cast<size_t>(got), offset += static_cast<uint64_t>(got);
  }
}
}  // namespace

namespace {
void pwrite_all(int fd, const void* data, size_t bytes, uint64_t offset, const std::string& path) {
  const char* p = static_cast<const char*>(data);
  while (bytes) {
    ssize_t put = ::pwrite(fd, p, bytes, static_cast<off_t>(offset));
    if (put < 0 && errno == EINTR) continue;
    if (put <= 0) throw_errno("cannot write", path);
    p += put, bytes -= static_cast<size_t>(put), offset += static_cast<uint64_t>(put);
  }
}

constexpr const char* kPieceFiles[3] = {"tokens.bin.partial", "sentences.bin.partial", "documents.bin.partial"};
}  // namespace

void TokenStorePieces::create(const std::string& dir, const TokenStoreCounts& total) {
  make_dirs(dir);
  std::remove(progress_path(dir).c_str());  // a one-process checkpoint must not describe these files
  const uint64_t bytes[3] = {total.tokens * sizeof(TokenId32), total.sentences * 8, total.documents * 8};
  for (int k = 0; k < 3; ++k) {
    const std::string path = path_join(dir, kPieceFiles[k]);
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) throw_errno("cannot create", path);
    const bool sized = ::ftruncate(fd, static_cast<off_t>(bytes[k])) == 0;
    ::close(fd);
    if (!sized) throw_errno("cannot size", path);
  }
}

TokenStorePieces::TokenStorePieces(const std::string& dir) : dir_(dir) {
  for (int k = 0; k < 3; ++k) {
    const std::string path = path_join(dir, kPieceFiles[k]);
    fds_[k] = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
    if (fds_[k] < 0) throw_errno("cannot open", path);  // the destructor closes those opened
  }
}

TokenStorePieces::~TokenStorePieces() {
  for (int fd : fds_)
    if (fd >= 0) ::close(fd);
}

void TokenStorePieces::write(const TokenStore& from, size_t first, size_t documents, const TokenStoreCounts& at) {
  if (documents == 0) return;
  const TokenStoreCounts begin = from.counts_before(first), end = from.counts_before(first + documents);
  // Tokens as they are; sentence and document ends shifted from `from`'s offsets to the whole store's.
  tokens_.resize(end.tokens - begin.tokens);
  from.read_tokens(begin.tokens, end.tokens, tokens_.data());
  pwrite_all(fds_[0], tokens_.data(), tokens_.size() * sizeof(TokenId32), at.tokens * sizeof(TokenId32),
             path_join(dir_, kPieceFiles[0]));
  ends_.resize(end.sentences - begin.sentences + 1);
  from.read_sentence_bounds(begin.sentences, ends_.size() - 1, ends_.data());
  for (uint64_t& e : ends_) e = e - begin.tokens + at.tokens;
  pwrite_all(fds_[1], ends_.data() + 1, (ends_.size() - 1) * 8, at.sentences * 8, path_join(dir_, kPieceFiles[1]));
  ends_.resize(documents);
  for (size_t k = 0; k < documents; ++k) ends_[k] = from.counts_before(first + k + 1).sentences - begin.sentences + at.sentences;
  pwrite_all(fds_[2], ends_.data(), documents * 8, at.documents * 8, path_join(dir_, kPieceFiles[2]));
}

void TokenStorePieces::finish() {
  for (int k = 0; k < 3; ++k)
    if (::fsync(fds_[k]) != 0) throw_errno("fsync failed", path_join(dir_, kPieceFiles[k]));
}

void TokenStore::read_sentence_bounds(uint64_t s0, size_t n, uint64_t* ends) const {
  if (s0 + n > sentence_ends_.size()) throw Error(Where{sentences_file_.path()}, "sentence index past the store");
  if (s0 == 0) {
    ends[0] = 0;
    pread_all(sentences_fd_, ends + 1, n * 8, 0, sentences_file_.path());
  } else {
    pread_all(sentences_fd_, ends, (n + 1) * 8, (s0 - 1) * 8, sentences_file_.path());
  }
}

std::span<const TokenId32> TokenStore::read_sentence(size_t d, size_t i) const {
  struct Window {
    uint64_t store = 0, doc = 0, first = 0, count = 0, used = 0;  // sentences [first, first + count) of doc
    std::vector<uint64_t> ends;
    std::vector<TokenId32> tokens;
  };
  constexpr size_t kSentences = 32, kTokens = 16384;
  thread_local Window windows[2];
  thread_local uint64_t clock = 0;
  ++clock;
  for (Window& w : windows)
    if (w.store == id_ && w.doc == d && i >= w.first && i < w.first + w.count) {
      w.used = clock;
      const uint64_t b = w.ends[i - w.first], e = w.ends[i - w.first + 1];
      return {w.tokens.data() + (b - w.ends[0]), e - b};
    }
  if (i >= num_sentences(d)) throw Error(cat("internal: sentence ", i, " of a ", num_sentences(d), "-sentence document"));
  Window& w = windows[0].used <= windows[1].used ? windows[0] : windows[1];
  w.store = 0;  // not valid until filled
  const size_t n = std::min(kSentences, num_sentences(d) - i);
  w.ends.resize(n + 1);
  read_sentence_bounds(first_sentence(d) + i, n, w.ends.data());
  size_t keep = 1;  // whole sentences up to kTokens, at least one
  for (size_t k = 0; k < n; ++k) {
    if (w.ends[k + 1] <= w.ends[k] || w.ends[k + 1] > tokens_.size())
      throw Error(Where::at_record(sentences_file_.path(), int64_t(first_sentence(d) + i + k)), "sentence ends must rise");
    if (k > 0 && w.ends[k + 1] - w.ends[0] <= kTokens) keep = k + 1;
  }
  w.tokens.resize(w.ends[keep] - w.ends[0]);
  read_tokens(w.ends[0], w.ends[keep], w.tokens.data());
  w.store = id_, w.doc = d, w.first = i, w.count = keep, w.used = clock;
  return {w.tokens.data(), w.ends[1] - w.ends[0]};
}

void TokenStore::read_tokens(uint64_t begin, uint64_t end, TokenId32* out) const {
  if (begin > end || end > tokens_.size()) throw Error(Where{tokens_file_.path()}, "token range past the store");
  pread_all(tokens_fd_, out, (end - begin) * sizeof(TokenId32), begin * sizeof(TokenId32), tokens_file_.path());
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

TokenStoreCounts TokenStore::counts_before(size_t d) const {
  if (d > num_documents()) throw Error(cat("internal: document ", d, " of a ", num_documents(), "-document store"));
  const uint64_t s = document_begin(d);
  return {d, s, sentence_begin(s)};
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
