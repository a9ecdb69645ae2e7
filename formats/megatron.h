// Megatron-LM indexed datasets: <prefix>.bin (tokens back to back) + <prefix>.idx (the index),
// byte-compatible with megatron/core/datasets/indexed_dataset.py (IndexedDatasetBuilder,
// _IndexWriter, _IndexReader). The .idx layout, all little endian:
//
//   "MMIDIDX\0\0"  u64 version (1)  u8 dtype code  u64 sequence count  u64 document count
//   int32  sequence_lengths[sequence count]     (tokens per sequence)
//   int64  sequence_pointers[sequence count]    (byte offset of each sequence in .bin)
//   int64  document_indices[document count]     (0, then the end sequence of every document)
//
// The "document count" field counts document_indices entries, so it is one more than the number
// of documents. Multimodal indexes (an int8 mode per sequence after document_indices) are not
// supported and are refused by the reader.
#pragma once
#include <bit>
#include <cstdint>
#include <cstring>
#include <iosfwd>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "common/error.h"
#include "common/file.h"
#include "common/hash.h"

namespace pretrain {

static_assert(std::endian::native == std::endian::little, "the .bin/.idx readers assume a little-endian host");

// Megatron's DType codes.
enum class MegatronDType : uint8_t {
  u8 = 1, i8 = 2, i16 = 3, i32 = 4, i64 = 5, f64 = 6, f32 = 7, u16 = 8,
};

size_t megatron_itemsize(MegatronDType dtype);  // bytes per token
const char* megatron_dtype_name(MegatronDType dtype);  // "uint16", "int32", … (numpy names)
bool megatron_dtype_valid(uint8_t code);
// Megatron's DType.optimal_dtype: uint16 when vocab_size < 65500, else int32.
MegatronDType megatron_optimal_dtype(int64_t vocab_size);

inline constexpr char kMegatronMagic[9] = {'M', 'M', 'I', 'D', 'I', 'D', 'X', '\0', '\0'};
inline constexpr uint64_t kMegatronVersion = 1;
inline constexpr size_t kMegatronHeaderBytes = 9 + 8 + 1 + 8 + 8;  // where sequence_lengths start

// "<p>.bin" / "<p>.idx" → "<p>"; anything else is returned unchanged (it is taken as the prefix).
std::string megatron_prefix(const std::string& path);
std::string megatron_bin_path(const std::string& prefix);  // prefix + ".bin"
std::string megatron_idx_path(const std::string& prefix);  // prefix + ".idx"

// Streams tokens to <prefix>.bin as they come and keeps only the sequence lengths and document
// boundaries in memory; finalize() writes <prefix>.idx and renames both into place. A writer that
// is destroyed before finalize() leaves no file behind. Both files are hashed (xxh3) while they are
// written, so a manifest needs no second pass over them.
class MegatronWriter {
 public:
  MegatronWriter(const std::string& prefix, MegatronDType dtype);
  ~MegatronWriter();
  MegatronWriter(const MegatronWriter&) = delete;
  MegatronWriter& operator=(const MegatronWriter&) = delete;

  // One sequence (Megatron's add_item). Every id must fit the dtype exactly, else Error naming
  // the sequence and the position.
  void add_sequence(std::span<const int32_t> tokens);
  void add_sequence(std::span<const int64_t> tokens);
  void add_sequence(std::span<const uint16_t> tokens);
  void add_sequence(std::span<const uint32_t> tokens);
  // Closes the current document at the current sequence count (Megatron's end_document). An
  // empty document is allowed, as in Megatron (it repeats the previous index).
  void end_document();
  // Megatron's add_document: `tokens` cut into sequences of `lengths`, then end_document().
  void add_document(std::span<const int32_t> tokens, std::span<const int64_t> lengths);
  // Writes the index and commits both files. Sequences added after the last end_document() are
  // refused (UsageError): Megatron would leave them out of every document.
  void finalize();

  MegatronDType dtype() const { return dtype_; }
  const std::string& prefix() const { return prefix_; }
  uint64_t num_sequences() const { return lengths_.size(); }
  uint64_t num_documents() const { return document_indices_.size() - 1; }
  uint64_t tokens_written() const { return tokens_; }
  uint64_t bin_bytes() const { return tokens_ * itemsize_; }
  // Valid after finalize(): hex64 xxh3 of each file and the .idx size.
  const std::string& bin_xxh3() const { return bin_xxh3_; }
  const std::string& idx_xxh3() const { return idx_xxh3_; }
  uint64_t idx_bytes() const { return idx_bytes_; }

 private:
  template <typename T>
  void append(std::span<const T> tokens);
  void write_out(const void* data, size_t n);
  void flush_buffer();
  void check_open() const;

  std::string prefix_;
  MegatronDType dtype_;
  size_t itemsize_;
  AtomicFile bin_;
  std::optional<AtomicFile> idx_;  // created by finalize()
  Xxh3Stream bin_hash_;
  // Converted tokens waiting for one large write. Not zero-filled: a writer that is given fewer
  // tokens touches fewer pages (8 MB each, and make-pretraining-shards opens one per shard).
  std::unique_ptr<uint8_t[]> buffer_;
  size_t buffered_ = 0;
  std::vector<int32_t> lengths_;
  std::vector<int64_t> document_indices_{0};
  uint64_t tokens_ = 0;
  bool finalized_ = false;
  bool broken_ = false;
  std::string bin_xxh3_, idx_xxh3_;
  uint64_t idx_bytes_ = 0;
};

// A little-endian array inside a mapped file. The .idx arrays start at byte 34, so they are not
// aligned for their type: elements are read with memcpy (one plain load on x86 and arm64).
template <typename T>
class UnalignedArray {
 public:
  UnalignedArray() = default;
  UnalignedArray(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  T operator[](size_t i) const {
    T v;
    std::memcpy(&v, data_ + i * sizeof(T), sizeof(T));
    return v;
  }
  T front() const { return (*this)[0]; }
  T back() const { return (*this)[size_ - 1]; }
  std::vector<T> to_vector() const {
    std::vector<T> out(size_);
    if (size_) std::memcpy(out.data(), data_, size_ * sizeof(T));
    return out;
  }

  class iterator {
   public:
    using value_type = T;
    using difference_type = std::ptrdiff_t;
    iterator() = default;
    iterator(const UnalignedArray* a, size_t i) : a_(a), i_(i) {}
    T operator*() const { return (*a_)[i_]; }
    iterator& operator++() { return ++i_, *this; }
    iterator operator++(int) { iterator t = *this; ++i_; return t; }
    bool operator==(const iterator& o) const { return i_ == o.i_; }

   private:
    const UnalignedArray* a_ = nullptr;
    size_t i_ = 0;
  };
  iterator begin() const { return {this, 0}; }
  iterator end() const { return {this, size_}; }

 private:
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

// Tokens of one sequence, pointing into the mapped .bin (valid while the reader lives).
struct TokenSpan {
  const void* data = nullptr;
  size_t size = 0;  // tokens
  MegatronDType dtype = MegatronDType::u16;

  size_t bytes() const { return size * megatron_itemsize(dtype); }
  // The tokens as their stored type; throws Error when T is not that type.
  template <typename T>
  std::span<const T> as() const;
  // Token i widened to int64 (any dtype; floats are truncated, NaN or out of range throws).
  int64_t operator[](size_t i) const;
  // Widens every token to int32 into out[0..size). Throws Error when a value does not fit.
  void to_int32(int32_t* out) const;
  std::vector<int32_t> to_int32() const;
  // Tokens [offset, offset + length) (Megatron's get(i, offset, length)); throws when out of range.
  TokenSpan sub(size_t offset, size_t length) const;
};

// Maps <prefix>.bin and <prefix>.idx and validates everything once, so that access afterwards is
// a bounds check and two loads: magic, version, dtype code, counts against the file size (checked
// arithmetic), lengths non-negative, every pointer equal to the sum of the lengths before it times
// the item size (as Megatron writes them), document_indices starting at 0, non-decreasing and
// ending at the sequence count, and the .bin size equal to the total tokens times the item size.
class MegatronReader {
 public:
  // `prefix` may also be the path of the .bin or the .idx.
  explicit MegatronReader(const std::string& prefix);
  MegatronReader(MegatronReader&&) noexcept = default;
  MegatronReader& operator=(MegatronReader&&) noexcept = default;

  const std::string& prefix() const { return prefix_; }
  const std::string& bin_path() const { return bin_.path(); }
  const std::string& idx_path() const { return idx_.path(); }
  MegatronDType dtype() const { return dtype_; }
  size_t itemsize() const { return itemsize_; }
  size_t num_sequences() const { return lengths_.size(); }
  size_t size() const { return lengths_.size(); }
  // Real documents: document_indices().size() - 1.
  size_t num_documents() const { return document_indices_.size() - 1; }
  uint64_t num_tokens() const { return bin_.size() / itemsize_; }
  uint64_t bin_bytes() const { return bin_.size(); }
  uint64_t idx_bytes() const { return idx_.size(); }

  UnalignedArray<int32_t> sequence_lengths() const { return lengths_; }
  UnalignedArray<int64_t> sequence_pointers() const { return pointers_; }
  UnalignedArray<int64_t> document_indices() const { return document_indices_; }

  // Sequence i (Megatron's dataset[i]); throws Error when i is out of range. Validation proved
  // every pointer is the sum of the lengths before it, so the span runs to the next pointer (or
  // the end of the .bin): one cache line of the index per lookup instead of two.
  TokenSpan sequence(size_t i) const {
    if (i >= lengths_.size()) throw_out_of_range(i);
    const uint64_t begin = uint64_t(pointers_[i]);
    const uint64_t end = i + 1 < lengths_.size() ? uint64_t(pointers_[i + 1]) : bin_.size();
    return {bin_.data() + begin, size_t((end - begin) >> item_shift_), dtype_};
  }
  TokenSpan operator[](size_t i) const { return sequence(i); }
  // Megatron's get(i, offset, length); length -1 means to the end of the sequence.
  TokenSpan get(size_t i, size_t offset = 0, int64_t length = -1) const;
  // Sequences [document_indices[d], document_indices[d+1]) of document d.
  std::pair<size_t, size_t> document_range(size_t d) const;

  // Kernel read-ahead hints for the .bin.
  void advise_random() const { bin_.advise_random(); }
  void advise_sequential() const { bin_.advise_sequential(); }

 private:
  void validate();
  [[noreturn]] void throw_out_of_range(size_t i) const;

  std::string prefix_;
  MappedFile idx_, bin_;
  MegatronDType dtype_ = MegatronDType::u16;
  size_t itemsize_ = 2;
  unsigned item_shift_ = 1;  // log2(itemsize_)
  UnalignedArray<int32_t> lengths_;
  UnalignedArray<int64_t> pointers_;
  UnalignedArray<int64_t> document_indices_;
};

// The Megatron dtype stored as C++ type T.
template <typename T>
constexpr MegatronDType megatron_dtype_of() {
  if constexpr (std::is_same_v<T, uint8_t>) return MegatronDType::u8;
  else if constexpr (std::is_same_v<T, int8_t>) return MegatronDType::i8;
  else if constexpr (std::is_same_v<T, int16_t>) return MegatronDType::i16;
  else if constexpr (std::is_same_v<T, int32_t>) return MegatronDType::i32;
  else if constexpr (std::is_same_v<T, int64_t>) return MegatronDType::i64;
  else if constexpr (std::is_same_v<T, double>) return MegatronDType::f64;
  else if constexpr (std::is_same_v<T, float>) return MegatronDType::f32;
  else if constexpr (std::is_same_v<T, uint16_t>) return MegatronDType::u16;
  else static_assert(sizeof(T) == 0, "no Megatron dtype for this type");
}

// Out of line, so that as<T>() stays small enough to inline into hot loops.
[[noreturn]] void throw_dtype_mismatch(MegatronDType stored, MegatronDType asked);

template <typename T>
std::span<const T> TokenSpan::as() const {
  if (dtype != megatron_dtype_of<T>()) throw_dtype_mismatch(dtype, megatron_dtype_of<T>());
  return {static_cast<const T*>(data), size};
}

// For shard-tool: records = sequences. `path` may be the prefix, the .bin or the .idx.
uint64_t count_megatron_records(const std::string& path);
// Header, counts, length statistics, and the first `max_records` sequences and documents.
void inspect_megatron(const std::string& path, std::ostream& out, int max_records);

}  // namespace pretrain
