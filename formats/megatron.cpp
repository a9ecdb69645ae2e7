#include "formats/megatron.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <ostream>
#include <utility>

namespace pretrain {

// ---- dtypes -------------------------------------------------------------------------------------

size_t megatron_itemsize(MegatronDType dtype) {
  switch (dtype) {
    case MegatronDType::u8: case MegatronDType::i8: return 1;
    case MegatronDType::i16: case MegatronDType::u16: return 2;
    case MegatronDType::i32: case MegatronDType::f32: return 4;
    case MegatronDType::i64: case MegatronDType::f64: return 8;
  }
  throw Error(cat("unknown Megatron dtype code ", int(dtype)));
}

const char* megatron_dtype_name(MegatronDType dtype) {
  switch (dtype) {
    case MegatronDType::u8: return "uint8";
    case MegatronDType::i8: return "int8";
    case MegatronDType::i16: return "int16";
    case MegatronDType::i32: return "int32";
    case MegatronDType::i64: return "int64";
    case MegatronDType::f64: return "float64";
    case MegatronDType::f32: return "float32";
    case MegatronDType::u16: return "uint16";
  }
  return "unknown";
}

bool megatron_dtype_valid(uint8_t code) { return code >= 1 && code <= 8; }

MegatronDType megatron_optimal_dtype(int64_t vocab_size) {
  return vocab_size < 65500 ? MegatronDType::u16 : MegatronDType::i32;
}

std::string megatron_prefix(const std::string& path) {
  if (path.ends_with(".bin") || path.ends_with(".idx")) return path.substr(0, path.size() - 4);
  return path;
}
std::string megatron_bin_path(const std::string& prefix) { return prefix + ".bin"; }
std::string megatron_idx_path(const std::string& prefix) { return prefix + ".idx"; }

// ---- writer -------------------------------------------------------------------------------------

static constexpr size_t kWriteBufferBytes = 8 << 20;  // one write() per 8 MB of tokens

MegatronWriter::MegatronWriter(const std::string& prefix, MegatronDType dtype)
    : prefix_(prefix), dtype_(dtype), itemsize_(megatron_itemsize(dtype)),
      bin_(megatron_bin_path(prefix)),
      buffer_(std::make_unique_for_overwrite<uint8_t[]>(kWriteBufferBytes)) {}

MegatronWriter::~MegatronWriter() = default;  // the AtomicFiles remove uncommitted temp files

void MegatronWriter::check_open() const {
  if (finalized_) throw UsageError(Where{bin_.path()}, "the Megatron writer was already finalized");
  if (broken_)
    throw UsageError(Where{bin_.path()}, "the Megatron writer failed in the middle of a long sequence; start again");
}

// Whether `v` is exactly representable as Out (floats: integers up to the mantissa's reach).
template <typename Out, typename In>
static bool fits(In v) {
  if constexpr (std::is_floating_point_v<Out>) {
    constexpr int64_t limit = int64_t(1) << std::numeric_limits<Out>::digits;
    return static_cast<int64_t>(v) >= -limit && static_cast<int64_t>(v) <= limit;
  } else {
    return std::in_range<Out>(v);
  }
}

// Converts `in` into `out`, returning the index of the first value that does not fit (or n).
// The common case is one branch-free pass the compiler vectorizes; only a failure looks back.
template <typename Out, typename In>
static size_t convert_tokens(const In* in, size_t n, uint8_t* out) {
  bool ok = true;
  for (size_t i = 0; i < n; ++i) {
    ok &= fits<Out>(in[i]);
    Out v = static_cast<Out>(in[i]);
    std::memcpy(out + i * sizeof(Out), &v, sizeof(Out));
  }
  if (ok) return n;
  for (size_t i = 0; i < n; ++i)
    if (!fits<Out>(in[i])) return i;
  return n;
}

template <typename In>
static size_t convert_to(MegatronDType dtype, const In* in, size_t n, uint8_t* out) {
  switch (dtype) {
    case MegatronDType::u8: return convert_tokens<uint8_t>(in, n, out);
    case MegatronDType::i8: return convert_tokens<int8_t>(in, n, out);
    case MegatronDType::i16: return convert_tokens<int16_t>(in, n, out);
    case MegatronDType::i32: return convert_tokens<int32_t>(in, n, out);
    case MegatronDType::i64: return convert_tokens<int64_t>(in, n, out);
    case MegatronDType::f64: return convert_tokens<double>(in, n, out);
    case MegatronDType::f32: return convert_tokens<float>(in, n, out);
    case MegatronDType::u16: return convert_tokens<uint16_t>(in, n, out);
  }
  return 0;
}

template <typename T>
void MegatronWriter::append(std::span<const T> tokens) {
  check_open();
  const size_t sequence = lengths_.size();
  if (tokens.size() > size_t(std::numeric_limits<int32_t>::max()))
    throw Error(Where::at_record(bin_.path(), int64_t(sequence)),
                cat("sequence of ", tokens.size(), " tokens is longer than the index can record (2^31 - 1)"));
  // A bad token leaves the writer as it was, unless part of the sequence already went to disk
  // (sequences over 8 MB): then the writer refuses further use.
  const size_t buffered_before = buffered_;
  bool flushed = false;
  for (size_t done = 0; done < tokens.size();) {
    if (buffered_ + itemsize_ > kWriteBufferBytes) flush_buffer(), flushed = true;
    const size_t n = std::min(tokens.size() - done, (kWriteBufferBytes - buffered_) / itemsize_);
    const size_t bad = convert_to(dtype_, tokens.data() + done, n, buffer_.get() + buffered_);
    if (bad != n) {
      if (flushed) broken_ = true;
      else buffered_ = buffered_before;
      throw Error(Where::at_record(bin_.path(), int64_t(sequence)),
                  cat("token ", int64_t(tokens[done + bad]), " at position ", done + bad,
                      " does not fit the dataset dtype ", megatron_dtype_name(dtype_)));
    }
    buffered_ += n * itemsize_;
    done += n;
  }
  lengths_.push_back(static_cast<int32_t>(tokens.size()));
  tokens_ += tokens.size();
}

void MegatronWriter::add_sequence(std::span<const int32_t> t) { append(t); }
void MegatronWriter::add_sequence(std::span<const int64_t> t) { append(t); }
void MegatronWriter::add_sequence(std::span<const uint16_t> t) { append(t); }
void MegatronWriter::add_sequence(std::span<const uint32_t> t) { append(t); }

void MegatronWriter::end_document() {
  check_open();
  document_indices_.push_back(static_cast<int64_t>(lengths_.size()));
}

void MegatronWriter::add_document(std::span<const int32_t> tokens, std::span<const int64_t> lengths) {
  check_open();
  uint64_t total = 0;
  for (int64_t n : lengths) {
    if (n < 0) throw UsageError(Where{bin_.path()}, cat("add_document: negative sequence length ", n));
    total += uint64_t(n);
  }
  if (total != tokens.size())
    throw UsageError(Where{bin_.path()}, cat("add_document: the lengths add up to ", total,
                                             " tokens, the document has ", tokens.size()));
  size_t at = 0;
  for (int64_t n : lengths) {
    add_sequence(tokens.subspan(at, size_t(n)));
    at += size_t(n);
  }
  end_document();
}

void MegatronWriter::write_out(const void* data, size_t n) {
  bin_.write(data, n);
  bin_hash_.update(data, n);
}

void MegatronWriter::flush_buffer() {
  if (buffered_) write_out(buffer_.get(), buffered_);
  buffered_ = 0;
}

void MegatronWriter::finalize() {
  check_open();
  if (document_indices_.back() != int64_t(lengths_.size()))
    throw UsageError(Where{bin_.path()},
                     cat(lengths_.size() - uint64_t(document_indices_.back()),
                         " sequences were added after the last end_document(); call end_document() before finalize()"));
  flush_buffer();
  buffer_.reset();

  idx_.emplace(megatron_idx_path(prefix_));
  Xxh3Stream idx_hash;
  auto put = [&](const void* p, size_t n) {
    idx_->write(p, n);
    idx_hash.update(p, n);
  };
  const uint8_t code = static_cast<uint8_t>(dtype_);
  const uint64_t sequences = lengths_.size(), documents = document_indices_.size();
  put(kMegatronMagic, sizeof kMegatronMagic);
  put(&kMegatronVersion, 8);
  put(&code, 1);
  put(&sequences, 8);
  put(&documents, 8);
  put(lengths_.data(), lengths_.size() * sizeof(int32_t));
  // Pointers are the running byte offsets (Megatron's _sequence_pointers), made in chunks.
  std::vector<int64_t> pointers(std::min<size_t>(lengths_.size(), 1 << 16));
  int64_t offset = 0;
  for (size_t i = 0; i < lengths_.size();) {
    size_t n = std::min(pointers.size(), lengths_.size() - i);
    for (size_t k = 0; k < n; ++k, ++i) {
      pointers[k] = offset;
      offset += int64_t(lengths_[i]) * int64_t(itemsize_);
    }
    put(pointers.data(), n * sizeof(int64_t));
  }
  put(document_indices_.data(), document_indices_.size() * sizeof(int64_t));

  bin_xxh3_ = hex64(bin_hash_.digest());
  idx_xxh3_ = hex64(idx_hash.digest());
  idx_bytes_ = idx_->bytes_written();
  // The .bin goes first: a reader that finds the .idx finds a complete .bin beside it.
  bin_.commit();
  idx_->commit();
  finalized_ = true;
}

// ---- token spans --------------------------------------------------------------------------------

void throw_dtype_mismatch(MegatronDType stored, MegatronDType asked) {
  throw Error(cat("tokens are ", megatron_dtype_name(stored), ", not ", megatron_dtype_name(asked)));
}

template <typename T>
static T load(const void* base, size_t i) {
  T v;
  std::memcpy(&v, static_cast<const uint8_t*>(base) + i * sizeof(T), sizeof(T));
  return v;
}

// A float token as an id: truncated, and refused when NaN or beyond int64.
static int64_t float_token(double v, size_t i) {
  if (!(v >= -9223372036854775808.0 && v < 9223372036854775808.0))
    throw Error(cat("token ", v, " at position ", i, " is not a token id"));
  return static_cast<int64_t>(v);
}

int64_t TokenSpan::operator[](size_t i) const {
  switch (dtype) {
    case MegatronDType::u8: return load<uint8_t>(data, i);
    case MegatronDType::i8: return load<int8_t>(data, i);
    case MegatronDType::i16: return load<int16_t>(data, i);
    case MegatronDType::i32: return load<int32_t>(data, i);
    case MegatronDType::i64: return load<int64_t>(data, i);
    case MegatronDType::f64: return float_token(load<double>(data, i), i);
    case MegatronDType::f32: return float_token(load<float>(data, i), i);
    case MegatronDType::u16: return load<uint16_t>(data, i);
  }
  return 0;
}

template <typename In>
static void widen(const void* data, size_t n, int32_t* out) {
  for (size_t i = 0; i < n; ++i) {
    In v = load<In>(data, i);
    if constexpr (std::is_floating_point_v<In>) {
      // Compared as double: 2^31 - 1 is not a float, and (float)2147483647 rounds up to 2^31.
      const double d = v;
      if (!(d >= -2147483648.0 && d < 2147483648.0) || d != std::trunc(d))
        throw Error(cat("token ", d, " at position ", i, " is not an int32 token id"));
    } else if constexpr (sizeof(In) >= 4) {
      if (!std::in_range<int32_t>(v)) throw Error(cat("token ", v, " at position ", i, " does not fit int32"));
    }
    out[i] = static_cast<int32_t>(v);
  }
}

void TokenSpan::to_int32(int32_t* out) const {
  switch (dtype) {
    case MegatronDType::u8: return widen<uint8_t>(data, size, out);
    case MegatronDType::i8: return widen<int8_t>(data, size, out);
    case MegatronDType::i16: return widen<int16_t>(data, size, out);
    case MegatronDType::i32: return widen<int32_t>(data, size, out);
    case MegatronDType::i64: return widen<int64_t>(data, size, out);
    case MegatronDType::f64: return widen<double>(data, size, out);
    case MegatronDType::f32: return widen<float>(data, size, out);
    case MegatronDType::u16: return widen<uint16_t>(data, size, out);
  }
}

std::vector<int32_t> TokenSpan::to_int32() const {
  std::vector<int32_t> out(size);
  to_int32(out.data());
  return out;
}

TokenSpan TokenSpan::sub(size_t offset, size_t length) const {
  if (offset > size || length > size - offset)
    throw Error(cat("tokens [", offset, ", ", offset + length, ") are outside a sequence of ", size, " tokens"));
  return {static_cast<const uint8_t*>(data) + offset * megatron_itemsize(dtype), length, dtype};
}

// ---- reader -------------------------------------------------------------------------------------

MegatronReader::MegatronReader(const std::string& prefix)
    : prefix_(megatron_prefix(prefix)), idx_(megatron_idx_path(prefix_)), bin_(megatron_bin_path(prefix_)) {
  validate();
}

static bool checked_mul(uint64_t a, uint64_t b, uint64_t* out) { return !__builtin_mul_overflow(a, b, out); }
static bool checked_add(uint64_t a, uint64_t b, uint64_t* out) { return !__builtin_add_overflow(a, b, out); }

void MegatronReader::validate() {
  const std::string& ip = idx_.path();
  const uint8_t* p = idx_.data();
  const uint64_t size = idx_.size();
  auto at = [&](uint64_t offset) { return Where::at_offset(ip, int64_t(offset)); };

  // Header: magic, version, dtype, counts.
  const size_t magic_seen = std::min<size_t>(size, sizeof kMegatronMagic);
  expect(magic_seen == 0 || std::memcmp(p, kMegatronMagic, magic_seen) == 0, at(0),
         "the Megatron index magic \"MMIDIDX\\0\\0\"", "other bytes (not a Megatron .idx file)");
  expect(size >= kMegatronHeaderBytes, at(size), cat("a ", kMegatronHeaderBytes, "-byte header"),
         cat("the end of the file after ", size, " bytes (truncated .idx)"));
  const uint64_t version = load<uint64_t>(p + 9, 0);
  expect(version == kMegatronVersion, at(9), "index version 1", cat("version ", version));
  const uint8_t code = p[17];
  expect(megatron_dtype_valid(code), at(17), "a dtype code 1-8", cat("code ", int(code)));
  dtype_ = static_cast<MegatronDType>(code);
  itemsize_ = megatron_itemsize(dtype_);
  item_shift_ = unsigned(std::countr_zero(itemsize_));
  const uint64_t sequences = load<uint64_t>(p + 18, 0);
  const uint64_t documents = load<uint64_t>(p + 26, 0);
  expect(documents >= 1, at(26), "a document count of at least 1 (document_indices starts with 0)", "0");

  // The arrays must fill the rest of the file exactly.
  uint64_t seq_bytes = 0, doc_bytes = 0, expected = 0;
  const bool representable = checked_mul(sequences, 12, &seq_bytes) && checked_mul(documents, 8, &doc_bytes) &&
                             checked_add(kMegatronHeaderBytes, seq_bytes, &expected) &&
                             checked_add(expected, doc_bytes, &expected);
  expect(representable && expected <= size, at(size),
         cat("a ", representable ? cat(expected, "-byte") : std::string("(impossibly large)"), " index for ",
             sequences, " sequences and ", documents, " document indices"),
         cat("the end of the file after ", size, " bytes (truncated .idx or corrupt counts)"));
  expect(expected == size, at(expected), cat("the end of the index (", expected, " bytes)"),
         cat(size - expected, " more bytes (a multimodal index with sequence modes is not supported)"));

  const uint64_t lengths_at = kMegatronHeaderBytes, pointers_at = lengths_at + sequences * 4,
                 documents_at = pointers_at + sequences * 8;
  lengths_ = {p + lengths_at, size_t(sequences)};
  pointers_ = {p + pointers_at, size_t(sequences)};
  document_indices_ = {p + documents_at, size_t(documents)};

  // Lengths and pointers: each pointer is the byte sum of the lengths before it, and no sequence
  // runs past the .bin. The running sum stays <= the .bin size, so it cannot overflow.
  const uint64_t bin_size = bin_.size();
  uint64_t offset = 0;
  for (uint64_t i = 0; i < sequences; ++i) {
    const int32_t length = lengths_[i];
    if (length < 0)
      throw Error(at(lengths_at + 4 * i), cat("sequence ", i, ": expected a non-negative length, found ", length));
    const int64_t pointer = pointers_[i];
    if (uint64_t(pointer) != offset || pointer < 0)
      throw Error(at(pointers_at + 8 * i), cat("sequence ", i, ": expected byte pointer ", offset,
                                               " (the sum of the previous lengths), found ", pointer));
    offset += uint64_t(length) * itemsize_;
    if (offset > bin_size)
      throw Error(Where::at_offset(bin_.path(), int64_t(bin_size)),
                  cat("sequence ", i, " ends at byte ", offset, ", past the end of the .bin (", bin_size,
                      " bytes; truncated .bin?)"));
  }
  if (offset != bin_size)
    throw Error(Where::at_offset(bin_.path(), int64_t(offset)),
                cat("expected ", offset, " bytes (", offset / itemsize_, " ", megatron_dtype_name(dtype_),
                    " tokens, as the index says), found ", bin_size));

  // Document indices: 0, non-decreasing, ending at the sequence count.
  expect(document_indices_[0] == 0, at(documents_at), "document_indices[0] == 0",
         cat(document_indices_[0]));
  for (uint64_t d = 1; d < documents; ++d) {
    const int64_t prev = document_indices_[d - 1], cur = document_indices_[d];
    if (cur < prev || uint64_t(cur) > sequences)
      throw Error(at(documents_at + 8 * d), cat("document_indices[", d, "]: expected a value in [", prev, ", ",
                                               sequences, "], found ", cur));
  }
  expect(uint64_t(document_indices_.back()) == sequences, at(documents_at + 8 * (documents - 1)),
         cat("the last document index to equal the sequence count ", sequences),
         cat(document_indices_.back()));
}

void MegatronReader::throw_out_of_range(size_t i) const {
  throw Error(Where::at_record(idx_.path(), int64_t(i)),
              cat("sequence ", i, " is out of range: the dataset has ", lengths_.size(), " sequences"));
}

TokenSpan MegatronReader::get(size_t i, size_t offset, int64_t length) const {
  TokenSpan s = sequence(i);
  size_t n = length < 0 ? (offset <= s.size ? s.size - offset : 0) : size_t(length);
  if (offset > s.size || n > s.size - offset)
    throw Error(Where::at_record(idx_.path(), int64_t(i)),
                cat("tokens [", offset, ", ", offset + n, ") are outside sequence ", i, " of ", s.size, " tokens"));
  return s.sub(offset, n);
}

std::pair<size_t, size_t> MegatronReader::document_range(size_t d) const {
  if (d >= num_documents())
    throw Error(Where{idx_.path()}, cat("document ", d, " is out of range: the dataset has ", num_documents(),
                                        " documents"));
  return {size_t(document_indices_[d]), size_t(document_indices_[d + 1])};
}

// ---- shard-tool helpers -------------------------------------------------------------------------

uint64_t count_megatron_records(const std::string& path) { return MegatronReader(path).num_sequences(); }

void inspect_megatron(const std::string& path, std::ostream& out, int max_records) {
  MegatronReader r(path);
  out << r.prefix() << ": Megatron indexed dataset (MMIDIDX version 1)\n"
      << "  dtype            " << megatron_dtype_name(r.dtype()) << " (code " << int(r.dtype()) << ", "
      << r.itemsize() << " bytes)\n"
      << "  sequences        " << r.num_sequences() << "\n"
      << "  documents        " << r.num_documents() << "\n"
      << "  tokens           " << r.num_tokens() << "\n"
      << "  .bin             " << r.bin_bytes() << " bytes\n"
      << "  .idx             " << r.idx_bytes() << " bytes\n";
  if (r.num_sequences()) {
    auto lengths = r.sequence_lengths();
    int32_t lo = lengths[0], hi = lengths[0];
    size_t empty = 0;
    for (int32_t n : lengths) lo = std::min(lo, n), hi = std::max(hi, n), empty += n == 0;
    out << "  sequence length  min " << lo << ", mean " << double(r.num_tokens()) / double(r.num_sequences())
        << ", max " << hi << " (" << empty << " empty)\n";
  }
  const size_t shown = std::min<size_t>(r.num_sequences(), size_t(std::max(max_records, 0)));
  for (size_t i = 0; i < shown; ++i) {
    TokenSpan s = r.sequence(i);
    out << "  sequence " << i << " (" << s.size << " tokens):";
    for (size_t k = 0; k < std::min<size_t>(s.size, 16); ++k) out << ' ' << s[k];
    out << (s.size > 16 ? " …\n" : "\n");
  }
  const size_t docs = std::min<size_t>(r.num_documents(), size_t(std::max(max_records, 0)));
  for (size_t d = 0; d < docs; ++d) {
    auto [first, last] = r.document_range(d);
    out << "  document " << d << ": sequences [" << first << ", " << last << ")\n";
  }
}

}  // namespace pretrain
