// One input file's signatures (dedup's stage-1 checkpoint, <output>/.work/sig-NNNNN.bin): per
// document its exact hash, whether it has shingles, its LSH band keys, its MinHash signature and its
// id. Sections are laid out so that each later reader reads only what it needs with pread: the
// bucket stage one band's keys for all documents (contiguous), the Jaccard check single signatures,
// the report single ids; nothing is mapped, so resident memory does not grow with the corpus.
//
//   header   magic "PTDDSIG1", key (u64), documents (u64), hashes K (u32), bands (u32), 32 bytes zero
//   flags    u8 per document (1: has a signature), padded to 8 bytes
//   exact    16 bytes per document (xxh3-128: low, high)
//   bands    u64 per document, band by band
//   sigs     K u32 per document
//   ids      u64 offsets per document + 1, then the id bytes, padded to 8 bytes
//   trailer  xxh3-64 of everything before it
//
// Native byte order: the file is scratch of one run on one machine (a job's ranks on machines of
// another byte order would fail the key check and start the stage over, never misread).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "datagen/dedup/exact_hash.h"

namespace pretrain {

// One document's stage-1 results.
struct DocSignature {
  Hash128 exact;
  bool has_minhash = false;
  std::vector<uint64_t> band_keys;  // bands values when has_minhash
  std::vector<uint32_t> signature;  // K values when has_minhash
  std::string id;
};

// Collects a file's documents in order and writes them (temp name, then rename).
class SignatureFileBuilder {
 public:
  SignatureFileBuilder(uint64_t key, int hashes, int bands);
  void add(const DocSignature& doc);
  uint64_t documents() const { return flags_.size(); }
  void write(const std::string& path) const;

 private:
  uint64_t key_;
  int hashes_, bands_;
  std::vector<uint8_t> flags_;
  std::vector<Hash128> exact_;
  std::vector<std::vector<uint64_t>> band_keys_;  // [band][doc]
  std::vector<uint32_t> signatures_;
  std::vector<uint64_t> id_offsets_{0};
  std::string ids_;
};

class SignatureFile {
 public:
  // Reads and checks the header and the file's size. Throws Error naming the file.
  explicit SignatureFile(std::string path);
  ~SignatureFile();
  SignatureFile(SignatureFile&& other) noexcept;
  SignatureFile& operator=(SignatureFile&&) = delete;
  SignatureFile(const SignatureFile&) = delete;

  const std::string& path() const { return path_; }
  uint64_t key() const { return key_; }
  uint64_t documents() const { return documents_; }
  int hashes() const { return hashes_; }
  int bands() const { return bands_; }

  // Reads the whole file and checks its trailer (a resumed run trusts no file it has not checked).
  bool verify() const;
  std::vector<uint8_t> flags() const;
  std::vector<Hash128> exact() const;
  Hash128 exact_hash(uint64_t doc) const;
  void band_keys(int band, uint64_t* out) const;  // documents() values
  void signature(uint64_t doc, uint32_t* out) const;  // hashes() values
  std::string id(uint64_t doc) const;

 private:
  void read_at(uint64_t offset, void* data, size_t n) const;
  std::string path_;
  int fd_ = -1;
  uint64_t key_ = 0, documents_ = 0;
  int hashes_ = 0, bands_ = 0;
  uint64_t flags_at_ = 0, exact_at_ = 0, bands_at_ = 0, sigs_at_ = 0, ids_at_ = 0, size_ = 0;
};

}  // namespace pretrain
