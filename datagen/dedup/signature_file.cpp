#include "datagen/dedup/signature_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "common/error.h"
#include "common/file.h"
#include "common/hash.h"

namespace pretrain {

namespace {

constexpr char kMagic[8] = {'P', 'T', 'D', 'D', 'S', 'I', 'G', '1'};
constexpr uint64_t kHeaderBytes = 64;

uint64_t pad8(uint64_t n) { return (n + 7) & ~uint64_t{7}; }

struct Header {
  char magic[8];
  uint64_t key, documents;
  uint32_t hashes, bands;
  uint8_t zero[32];
};
static_assert(sizeof(Header) == kHeaderBytes);

}  // namespace

SignatureFileBuilder::SignatureFileBuilder(uint64_t key, int hashes, int bands)
    : key_(key), hashes_(hashes), bands_(bands), band_keys_(static_cast<size_t>(bands)) {}

void SignatureFileBuilder::add(const DocSignature& doc) {
  flags_.push_back(doc.has_minhash ? 1 : 0);
  exact_.push_back(doc.exact);
  for (int b = 0; b < bands_; ++b) band_keys_[b].push_back(doc.has_minhash ? doc.band_keys[b] : 0);
  if (doc.has_minhash) signatures_.insert(signatures_.end(), doc.signature.begin(), doc.signature.end());
  else signatures_.resize(signatures_.size() + static_cast<size_t>(hashes_), 0);
  ids_ += doc.id;
  id_offsets_.push_back(ids_.size());
}

void SignatureFileBuilder::write(const std::string& path) const {
  AtomicFile file(path);
  Xxh3Stream hash;
  auto put = [&](const void* data, size_t n) {
    file.write(data, n);
    hash.update(data, n);
  };
  auto pad = [&](uint64_t n) {
    static const char zeros[8] = {};
    put(zeros, pad8(n) - n);
  };
  Header h{};
  std::memcpy(h.magic, kMagic, sizeof kMagic);
  h.key = key_;
  h.documents = documents();
  h.hashes = static_cast<uint32_t>(hashes_);
  h.bands = static_cast<uint32_t>(bands_);
  put(&h, sizeof h);
  put(flags_.data(), flags_.size());
  pad(flags_.size());
  put(exact_.data(), exact_.size() * sizeof(Hash128));
  for (const auto& keys : band_keys_) put(keys.data(), keys.size() * sizeof(uint64_t));
  put(signatures_.data(), signatures_.size() * sizeof(uint32_t));
  put(id_offsets_.data(), id_offsets_.size() * sizeof(uint64_t));
  put(ids_.data(), ids_.size());
  pad(ids_.size());
  uint64_t sum = hash.digest();
  file.write(&sum, sizeof sum);
  file.commit();
}

SignatureFile::SignatureFile(std::string path) : path_(std::move(path)) {
  fd_ = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd_ < 0) throw_errno("cannot open", path_);
  size_ = file_size(path_);
  if (size_ < kHeaderBytes + 8) throw Error(Where{path_}, cat("expected a signature file of at least ", kHeaderBytes + 8, " bytes, found ", size_));
  Header h{};
  read_at(0, &h, sizeof h);
  if (std::memcmp(h.magic, kMagic, sizeof kMagic) != 0) throw Error(Where::at_offset(path_, 0), "expected the magic PTDDSIG1 of a dedup signature file");
  key_ = h.key;
  documents_ = h.documents;
  hashes_ = static_cast<int>(h.hashes);
  bands_ = static_cast<int>(h.bands);
  const uint64_t n = documents_;
  if (n > (uint64_t{1} << 40) || h.hashes == 0 || h.hashes > 4096 || h.bands == 0 || h.bands > h.hashes)
    throw Error(Where::at_offset(path_, 8), "expected a plausible header (documents, hashes, bands)");
  flags_at_ = kHeaderBytes;
  exact_at_ = flags_at_ + pad8(n);
  bands_at_ = exact_at_ + n * sizeof(Hash128);
  sigs_at_ = bands_at_ + n * static_cast<uint64_t>(bands_) * sizeof(uint64_t);
  ids_at_ = sigs_at_ + n * static_cast<uint64_t>(hashes_) * sizeof(uint32_t);
  uint64_t id_bytes_at = ids_at_ + (n + 1) * sizeof(uint64_t);
  if (id_bytes_at + 8 > size_) throw Error(Where{path_}, cat("expected at least ", id_bytes_at + 8, " bytes for ", n, " documents, found ", size_));
  uint64_t id_bytes = 0;
  read_at(ids_at_ + n * sizeof(uint64_t), &id_bytes, sizeof id_bytes);
  if (id_bytes_at + pad8(id_bytes) + 8 != size_)
    throw Error(Where{path_}, cat("expected ", id_bytes_at + pad8(id_bytes) + 8, " bytes for ", n, " documents, found ", size_));
}

SignatureFile::~SignatureFile() {
  if (fd_ >= 0) ::close(fd_);
}

SignatureFile::SignatureFile(SignatureFile&& o) noexcept
    : path_(std::move(o.path_)), fd_(o.fd_), key_(o.key_), documents_(o.documents_), hashes_(o.hashes_),
      bands_(o.bands_), flags_at_(o.flags_at_), exact_at_(o.exact_at_), bands_at_(o.bands_at_),
      sigs_at_(o.sigs_at_), ids_at_(o.ids_at_), size_(o.size_) {
  o.fd_ = -1;
}

void SignatureFile::read_at(uint64_t offset, void* data, size_t n) const {
  auto* p = static_cast<char*>(data);
  while (n > 0) {
    ssize_t got = ::pread(fd_, p, n, static_cast<off_t>(offset));
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) throw_errno("cannot read", path_);
    if (got == 0) throw Error(Where::at_offset(path_, static_cast<int64_t>(offset)), "unexpected end of file");
    p += got, n -= static_cast<size_t>(got), offset += static_cast<uint64_t>(got);
  }
}

bool SignatureFile::verify() const {
  Xxh3Stream hash;
  std::vector<char> buffer(size_t{1} << 20);
  uint64_t body = size_ - 8;
  for (uint64_t at = 0; at < body;) {
    size_t n = static_cast<size_t>(std::min<uint64_t>(buffer.size(), body - at));
    read_at(at, buffer.data(), n);
    hash.update(buffer.data(), n);
    at += n;
  }
  uint64_t sum = 0;
  read_at(body, &sum, sizeof sum);
  return sum == hash.digest();
}

std::vector<uint8_t> SignatureFile::flags() const {
  std::vector<uint8_t> out(documents_);
  read_at(flags_at_, out.data(), out.size());
  return out;
}

std::vector<Hash128> SignatureFile::exact() const {
  std::vector<Hash128> out(documents_);
  read_at(exact_at_, out.data(), out.size() * sizeof(Hash128));
  return out;
}

Hash128 SignatureFile::exact_hash(uint64_t doc) const {
  Hash128 h;
  read_at(exact_at_ + doc * sizeof(Hash128), &h, sizeof h);
  return h;
}

void SignatureFile::band_keys(int band, uint64_t* out) const {
  if (band < 0 || band >= bands_) throw Error(Where{path_}, cat("band ", band, " of ", bands_));
  read_at(bands_at_ + static_cast<uint64_t>(band) * documents_ * sizeof(uint64_t), out, documents_ * sizeof(uint64_t));
}

void SignatureFile::signature(uint64_t doc, uint32_t* out) const {
  read_at(sigs_at_ + doc * static_cast<uint64_t>(hashes_) * sizeof(uint32_t), out, static_cast<size_t>(hashes_) * sizeof(uint32_t));
}

std::string SignatureFile::id(uint64_t doc) const {
  uint64_t range[2];
  read_at(ids_at_ + doc * sizeof(uint64_t), range, sizeof range);
  uint64_t first = ids_at_ + (documents_ + 1) * sizeof(uint64_t);
  if (range[1] < range[0] || first + range[1] > size_ - 8) throw Error(Where::at_record(path_, static_cast<int64_t>(doc)), "expected an id within the file");
  std::string out(range[1] - range[0], '\0');
  read_at(first + range[0], out.data(), out.size());
  return out;
}

}  // namespace pretrain
