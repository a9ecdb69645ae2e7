#include "datagen/shards/token_store.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "common/communicator.h"
#include "common/error.h"
#include "common/json_integer.h"

namespace pretrain {

namespace {

std::string progress_path(const std::string& dir) { return path_join(dir, "progress.json"); }
std::string meta_path(const std::string& dir) { return path_join(dir, "store.json"); }
constexpr const char* kFiles[3] = {"tokens.bin", "sentences.bin", "documents.bin"};

// A file descriptor closed on every path out.
struct Fd {
  int fd = -1;
  std::string path;
  Fd(const std::string& p, int flags) : fd(::open(p.c_str(), flags | O_CLOEXEC, 0644)), path(p) {
    if (fd < 0) throw_errno("cannot open", p);
  }
  ~Fd() { ::close(fd); }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  void sync() const {
    if (::fdatasync(fd) != 0) throw_errno("cannot sync", path);
  }
};

// store.json's fields, whatever its key.
std::optional<TokenStoreMeta> parse_meta(const std::string& dir, nlohmann::json* key) {
  if (!file_exists(meta_path(dir))) return std::nullopt;
  try {
    const nlohmann::json j = nlohmann::json::parse(read_file(meta_path(dir)));
    TokenStoreMeta m;
    m.counts = {json_integer<uint64_t>(j.at("documents")), json_integer<uint64_t>(j.at("sentences")),
                json_integer<uint64_t>(j.at("tokens"))};
    m.token_bytes = json_integer<int>(j.value("token_bytes", nlohmann::json(4)));
    if (m.token_bytes != 2 && m.token_bytes != 4) return std::nullopt;
    m.taken_by = j.value("taken_by", nlohmann::json());
    m.freed = j.value("freed", false);
    if (key) *key = j.at("key");
    return m;
  } catch (const std::exception&) {
    return std::nullopt;  // damaged: as if there were none
  }
}

void write_meta(const std::string& dir, const nlohmann::json& key, const TokenStoreMeta& m) {
  nlohmann::json j = {{"key", key},
                      {"documents", m.counts.documents},
                      {"sentences", m.counts.sentences},
                      {"tokens", m.counts.tokens},
                      {"token_bytes", m.token_bytes}};
  if (!m.taken_by.is_null()) j["taken_by"] = m.taken_by;
  if (m.freed) j["freed"] = true;
  write_file_atomic(meta_path(dir), j.dump(2) + "\n");
}

// The three files hold exactly what store.json counts (`suffix`: "" committed, ".partial" being joined).
bool files_hold(const std::string& dir, const TokenStoreCounts& c, int token_bytes, const std::string& suffix = "") {
  const uint64_t bytes[3] = {c.tokens * uint64_t(token_bytes), c.sentences * 8, c.documents * 8};
  for (int k = 0; k < 3; ++k) {
    const std::string path = path_join(dir, kFiles[k] + suffix);
    if (!file_exists(path) || file_size(path) != bytes[k]) return false;
  }
  return true;
}

}  // namespace

int token_store_width(int64_t vocab_size) { return vocab_size <= 65536 ? 2 : 4; }

std::optional<TokenStoreMeta> read_token_store_meta(const std::string& dir, const nlohmann::json& key) {
  nlohmann::json found;
  auto m = parse_meta(dir, &found);
  if (!m || found != key) return std::nullopt;
  return m;
}

void take_token_store(const std::string& dir, const nlohmann::json& by) {
  nlohmann::json key;
  auto m = parse_meta(dir, &key);
  if (!m) throw Error(Where{meta_path(dir)}, "expected a committed token store");
  m->taken_by = by;
  write_meta(dir, key, *m);
}

void free_token_store(const std::string& dir) {
  nlohmann::json key;
  auto m = parse_meta(dir, &key);
  if (!m) throw Error(Where{meta_path(dir)}, "expected a committed token store");
  m->freed = true;
  write_meta(dir, key, *m);  // first: a store.json that still says whole must not outlive the files
  for (const char* name : kFiles) std::remove(path_join(dir, name).c_str());
}

TokenStoreWriter::TokenStoreWriter(const std::string& dir, int token_bytes)
    : TokenStoreWriter(dir, TokenStoreCounts{}, token_bytes) {
  std::remove(progress_path(dir).c_str());  // a checkpoint of another run must not describe these files
}

TokenStoreWriter::TokenStoreWriter(const std::string& dir, const TokenStoreCounts& from, int token_bytes)
    : dir_(dir),
      token_bytes_(token_bytes),
      tokens_file_(AtomicFile::resumable(path_join(dir, "tokens.bin"), from.tokens * uint64_t(token_bytes))),
      sentences_file_(AtomicFile::resumable(path_join(dir, "sentences.bin"), from.sentences * 8)),
      documents_file_(AtomicFile::resumable(path_join(dir, "documents.bin"), from.documents * 8)),
      documents_(from.documents),
      sentences_(from.sentences),
      tokens_(from.tokens) {
  if (token_bytes != 2 && token_bytes != 4) throw Error(cat("internal: a token store of ", token_bytes, "-byte ids"));
}

std::optional<TokenStoreWriter::Checkpoint> TokenStoreWriter::resume_point(const std::string& dir,
                                                                           const nlohmann::json& key, int token_bytes) {
  if (!file_exists(progress_path(dir))) return std::nullopt;
  try {
    nlohmann::json p = nlohmann::json::parse(read_file(progress_path(dir)));
    if (p.at("key") != key || json_integer<int>(p.value("token_bytes", nlohmann::json(4))) != token_bytes) return std::nullopt;
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
    if (!holds("tokens.bin", c.tokens * uint64_t(token_bytes)) || !holds("sentences.bin", c.sentences * 8) ||
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
  nlohmann::json p = {{"key", key},         {"documents", documents_},           {"sentences", sentences_},
                      {"tokens", tokens_},  {"input_documents", input_documents}, {"token_bytes", token_bytes_}};
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
  if (token_bytes_ == 4) {
    tokens_file_.write(tokens.data(), tokens.size() * sizeof(TokenId32));
  } else {
    narrow_.resize(tokens.size());
    for (size_t i = 0; i < tokens.size(); ++i) {
      if (tokens[i] < 0 || tokens[i] > 65535)
        throw Error(Where{tokens_file_.path()}, cat("token id ", tokens[i], " does not fit the store's 16-bit ids"));
      narrow_[i] = uint16_t(tokens[i]);
    }
    tokens_file_.write(narrow_.data(), narrow_.size() * sizeof(uint16_t));
  }
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
  write_meta(dir_, key, {.counts = counts(), .token_bytes = token_bytes_});
  std::remove(progress_path(dir_).c_str());
}

bool TokenStore::complete(const std::string& dir, const nlohmann::json& key) {
  const auto m = read_token_store_meta(dir, key);
  return m && m->taken_by.is_null() && !m->freed && files_hold(dir, m->counts, m->token_bytes);
}

namespace {
std::atomic<uint64_t> next_store_id{1};

int store_width(const std::string& dir) {
  const auto m = parse_meta(dir, nullptr);
  if (!m) throw Error(Where{meta_path(dir)}, "expected the store.json of a committed token store");
  return m->token_bytes;
}
}  // namespace

TokenStore::TokenStore(const std::string& dir, uint64_t resident_budget)
    : token_bytes_(store_width(dir)),
      tokens_file_(path_join(dir, "tokens.bin")),
      sentences_file_(path_join(dir, "sentences.bin")),
      documents_file_(path_join(dir, "documents.bin")),
      resident_budget_(resident_budget),
      token_regions_(tokens_file_.size()),
      sentence_regions_(sentences_file_.size()) {
  tokens_ = tokens_file_.data();
  num_tokens_ = tokens_file_.size() / uint64_t(token_bytes_);
  sentence_ends_ = {reinterpret_cast<const uint64_t*>(sentences_file_.data()), sentences_file_.size() / 8};
  documents_ = {reinterpret_cast<const uint64_t*>(documents_file_.data()), documents_file_.size() / 8};
  // The ends must rise and stay inside the arrays they index, or reads would leave the maps.
  uint64_t prev = 0;
  for (size_t i = 0; i < sentence_ends_.size(); ++i) {
    if (sentence_ends_[i] <= prev && i) throw Error(Where::at_record(sentences_file_.path(), int64_t(i)), "sentence ends must rise");
    prev = sentence_ends_[i];
  }
  if (prev > num_tokens_) throw Error(Where{sentences_file_.path()}, "sentence ends past the token file");
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

std::span<const TokenId32> TokenStore::mapped_tokens(uint64_t begin, uint64_t end, std::vector<TokenId32>& buffer) const {
  if (token_bytes_ == 4) return {reinterpret_cast<const TokenId32*>(tokens_) + begin, end - begin};
  const uint16_t* narrow = reinterpret_cast<const uint16_t*>(tokens_);
  buffer.assign(narrow + begin, narrow + end);
  return buffer;
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
    if (w.ends[k + 1] <= w.ends[k] || w.ends[k + 1] > num_tokens_)
      throw Error(Where::at_record(sentences_file_.path(), int64_t(first_sentence(d) + i + k)), "sentence ends must rise");
    if (k > 0 && w.ends[k + 1] - w.ends[0] <= kTokens) keep = k + 1;
  }
  w.tokens.resize(w.ends[keep] - w.ends[0]);
  read_tokens(w.ends[0], w.ends[keep], w.tokens.data());
  w.store = id_, w.doc = d, w.first = i, w.count = keep, w.used = clock;
  return {w.tokens.data(), w.ends[1] - w.ends[0]};
}

void TokenStore::read_token_bytes(uint64_t begin, uint64_t end, void* out) const {
  if (begin > end || end > num_tokens_) throw Error(Where{tokens_file_.path()}, "token range past the store");
  pread_all(tokens_fd_, out, (end - begin) * uint64_t(token_bytes_), begin * uint64_t(token_bytes_), tokens_file_.path());
}

void TokenStore::read_tokens(uint64_t begin, uint64_t end, TokenId32* out) const {
  if (token_bytes_ == 4) return read_token_bytes(begin, end, out);
  // Narrow ids read into the upper half of `out`, then widened from the front: each id is read
  // before the int32 written over it (out[i] spans bytes 4i..4i+3, the id bytes n·2+2i..).
  const size_t n = size_t(end - begin);
  unsigned char* narrow = reinterpret_cast<unsigned char*>(out) + 2 * n;
  read_token_bytes(begin, end, narrow);
  for (size_t i = 0; i < n; ++i) {
    uint16_t id;
    std::memcpy(&id, narrow + 2 * i, 2);
    out[i] = TokenId32(id);
  }
}

bool TokenStore::free_tokens(uint64_t begin, uint64_t end) const {
  constexpr uint64_t kPage = 4096;
  const uint64_t first = (begin * uint64_t(token_bytes_) + kPage - 1) / kPage * kPage;
  const uint64_t last = std::min<uint64_t>(end * uint64_t(token_bytes_), tokens_file_.size()) / kPage * kPage;
  if (last <= first) return true;
  const Fd fd(tokens_file_.path(), O_WRONLY);
  if (::fallocate(fd.fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, off_t(first), off_t(last - first)) == 0) return true;
  if (errno == EOPNOTSUPP || errno == ENOSYS) return false;
  throw_errno("cannot free the consumed part of", tokens_file_.path());
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
  if (end > begin) added += token_regions_.mark(begin * uint64_t(token_bytes_), end * uint64_t(token_bytes_));
  if (added == 0 || touched_.fetch_add(added, std::memory_order_relaxed) + added < resident_budget_) return;
  if (touched_.exchange(0, std::memory_order_relaxed) >= resident_budget_) release_pages();  // one thread releases
}

TokenStoreCounts TokenStore::counts_before(size_t d) const {
  if (d > num_documents()) throw Error(cat("internal: document ", d, " of a ", num_documents(), "-document store"));
  const uint64_t s = document_begin(d);
  return {d, s, sentence_begin(s)};
}

uint64_t TokenStore::document_size(size_t d) const {
  return sentence_ends_[document_end(d) - 1] - sentence_begin(document_begin(d));
}

std::span<const TokenId32> TokenStore::sentence(size_t d, size_t i) const {
  thread_local std::vector<TokenId32> widened;
  const size_t s = document_begin(d) + i;
  const uint64_t b = sentence_begin(s);
  touch(b, sentence_ends_[s], s);
  return mapped_tokens(b, sentence_ends_[s], widened);
}

std::span<const TokenId32> TokenStore::document_tokens(size_t d) const {
  thread_local std::vector<TokenId32> widened;
  const uint64_t b = sentence_begin(document_begin(d));
  const uint64_t e = sentence_ends_[document_end(d) - 1];
  touch(b, e, document_end(d) - 1);
  return mapped_tokens(b, e, widened);
}

// ---- TokenStoreJoin ------------------------------------------------------------------------

namespace {
std::string join_path(const std::string& dir) { return path_join(dir, "join.json"); }
std::string moving_path(const std::string& piece_dir) { return path_join(piece_dir, "moving.json"); }
std::string partial(const std::string& dir, int k) { return path_join(dir, std::string(kFiles[k]) + ".partial"); }

nlohmann::json counts_json(const TokenStoreCounts& c) {
  return {{"documents", c.documents}, {"sentences", c.sentences}, {"tokens", c.tokens}};
}
TokenStoreCounts counts_of(const nlohmann::json& j) {
  return {json_integer<uint64_t>(j.at("documents")), json_integer<uint64_t>(j.at("sentences")),
          json_integer<uint64_t>(j.at("tokens"))};
}

// Copies `count` uint64 ends from `from` to `to` at `to_offset` (entries), each plus `shift`.
void copy_shifted(const std::string& from, uint64_t count, const Fd& to, uint64_t to_offset, uint64_t shift) {
  const Fd in(from, O_RDONLY);
  std::vector<uint64_t> buffer;
  for (uint64_t at = 0; at < count;) {
    const uint64_t n = std::min<uint64_t>(count - at, uint64_t{1} << 20);
    buffer.resize(size_t(n));
    pread_all(in.fd, buffer.data(), size_t(n * 8), at * 8, from);
    for (uint64_t& e : buffer) e += shift;
    pwrite_all(to.fd, buffer.data(), size_t(n * 8), (to_offset + at) * 8, to.path);
    at += n;
  }
}
}  // namespace

void TokenStoreJoin::begin(const std::string& dir, const std::vector<TokenStoreCounts>& pieces, int token_bytes,
                           const nlohmann::json& key) {
  make_dirs(dir);
  std::remove(join_path(dir).c_str());
  std::remove(progress_path(dir).c_str());  // a one-process checkpoint must not describe these files
  std::remove(meta_path(dir).c_str());
  TokenStoreCounts total;
  nlohmann::json listed = nlohmann::json::array();
  for (const TokenStoreCounts& p : pieces) total += p, listed.push_back(counts_json(p));
  const uint64_t bytes[3] = {total.tokens * uint64_t(token_bytes), total.sentences * 8, total.documents * 8};
  for (int k = 0; k < 3; ++k) {
    const Fd fd(partial(dir, k), O_WRONLY | O_CREAT | O_TRUNC);
    if (::ftruncate(fd.fd, static_cast<off_t>(bytes[k])) != 0) throw_errno("cannot size", fd.path);
  }
  const nlohmann::json j = {{"key", key}, {"token_bytes", token_bytes}, {"pieces", listed}};
  write_file_atomic(join_path(dir), j.dump() + "\n");
}

std::optional<std::vector<TokenStoreCounts>> TokenStoreJoin::begun(const std::string& dir, const nlohmann::json& key) {
  if (!file_exists(join_path(dir))) return std::nullopt;
  try {
    const nlohmann::json j = nlohmann::json::parse(read_file(join_path(dir)));
    if (j.at("key") != key) return std::nullopt;
    std::vector<TokenStoreCounts> pieces;
    TokenStoreCounts total;
    for (const nlohmann::json& p : j.at("pieces")) pieces.push_back(counts_of(p)), total += pieces.back();
    if (!files_hold(dir, total, json_integer<int>(j.at("token_bytes")), ".partial")) return std::nullopt;
    return pieces;
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

std::optional<TokenStoreCounts> TokenStoreJoin::piece_counts(const std::string& piece_dir,
                                                             const nlohmann::json& piece_key) {
  const auto m = read_token_store_meta(piece_dir, piece_key);
  if (!m || !m->taken_by.is_null() || m->freed) return std::nullopt;
  if (file_exists(moving_path(piece_dir)) || files_hold(piece_dir, m->counts, m->token_bytes)) return m->counts;
  return std::nullopt;
}

void TokenStoreJoin::move_piece(const std::string& dir, const std::string& piece_dir, const TokenStoreCounts& at,
                                uint64_t chunk_bytes) {
  const auto meta = parse_meta(piece_dir, nullptr);
  if (!meta) throw Error(Where{meta_path(piece_dir)}, "expected a committed piece of the token store");
  const int width = meta->token_bytes;
  const TokenStoreCounts n = meta->counts;
  const Fd tokens(partial(dir, 0), O_WRONLY), sentences(partial(dir, 1), O_WRONLY), documents(partial(dir, 2), O_WRONLY);
  if (file_exists(moving_path(piece_dir))) {
    // Its ends are in the store already: only where they went must agree.
    const nlohmann::json j = nlohmann::json::parse(read_file(moving_path(piece_dir)));
    if (counts_of(j) != at)
      throw Error(Where{moving_path(piece_dir)}, "the piece was being moved to another place in the store");
  } else {
    copy_shifted(path_join(piece_dir, kFiles[1]), n.sentences, sentences, at.sentences, at.tokens);
    copy_shifted(path_join(piece_dir, kFiles[2]), n.documents, documents, at.documents, at.sentences);
    sentences.sync();
    documents.sync();
    write_file_atomic(moving_path(piece_dir), counts_json(at).dump() + "\n");
  }
  // Tokens from the end: bytes [size, whole) of the piece are in the store, on disk.
  const std::string piece_tokens = path_join(piece_dir, kFiles[0]);
  const Fd in(piece_tokens, O_RDWR);
  uint64_t size = file_size(piece_tokens);
  if (size > n.tokens * uint64_t(width)) throw Error(Where{piece_tokens}, "longer than the piece's store.json says");
  chunk_bytes = std::max<uint64_t>(4096, chunk_bytes / 4096 * 4096);
  std::vector<char> buffer;
  while (size > 0) {
    const uint64_t begin = size > chunk_bytes ? (size - 1) / chunk_bytes * chunk_bytes : 0;
    buffer.resize(size_t(size - begin));
    pread_all(in.fd, buffer.data(), buffer.size(), begin, piece_tokens);
    pwrite_all(tokens.fd, buffer.data(), buffer.size(), at.tokens * uint64_t(width) + begin, tokens.path);
    tokens.sync();
    if (::ftruncate(in.fd, off_t(begin)) != 0) throw_errno("cannot truncate", piece_tokens);
    size = begin;
    fault_point("store-move-chunk");  // tests: killed with a piece half moved
  }
  // Gone in one step, then removed: killed halfway through removing its files, the piece would
  // have lost its `moving` marker but kept store.json, and a resumed join would take it for a piece
  // it never counted. A moved-piece-* directory left by a kill is cleared by the next run.
  const std::string moved = path_join(dir_name(piece_dir), "moved-" + base_name(piece_dir));
  std::error_code ec;
  std::filesystem::remove_all(moved, ec);
  std::filesystem::rename(piece_dir, moved, ec);
  if (ec) throw Error(Where{piece_dir}, cat("cannot rename the moved piece: ", ec.message()));
  std::filesystem::remove_all(moved, ec);
  if (ec) throw Error(Where{moved}, cat("cannot remove the moved piece: ", ec.message()));
}

void TokenStoreJoin::commit(const std::string& dir, const TokenStoreCounts& total, int token_bytes,
                            const nlohmann::json& key) {
  TokenStoreWriter(dir, total, token_bytes).commit(key);
  std::remove(join_path(dir).c_str());
}

}  // namespace pretrain
