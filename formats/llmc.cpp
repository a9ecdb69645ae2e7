#include "formats/llmc.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <ostream>
#include <utility>

#include "common/error.h"

namespace pretrain {

size_t llmc_itemsize(LlmcFormat format) { return format == LlmcFormat::gpt2 ? 2 : 4; }
const char* llmc_format_name(LlmcFormat format) { return format == LlmcFormat::gpt2 ? "gpt-2" : "llama-3"; }

static const char* token_type_name(LlmcFormat format) { return format == LlmcFormat::gpt2 ? "uint16" : "uint32"; }

// ---- writer -------------------------------------------------------------------------------------

static constexpr size_t kChunkTokens = 1 << 21;  // tokens converted per write()

LlmcWriter::LlmcWriter(const std::string& path, LlmcFormat format) : file_(path), format_(format) {
  // A zero header holds the place; commit() writes the real one over it.
  const std::vector<char> zeros(kLlmcHeaderBytes, 0);
  file_.write(zeros.data(), zeros.size());
}

template <typename Out, typename In>
static size_t first_misfit(std::span<const In> tokens) {
  if constexpr (std::is_same_v<In, Out> || (std::is_unsigned_v<In> && sizeof(In) <= sizeof(Out))) {
    return tokens.size();  // every value fits
  } else {
    bool ok = true;
    for (In v : tokens) ok &= std::in_range<Out>(v);
    if (ok) return tokens.size();
    for (size_t i = 0; i < tokens.size(); ++i)
      if (!std::in_range<Out>(tokens[i])) return i;
    return tokens.size();
  }
}

template <typename Out, typename In>
static void write_as(AtomicFile& file, std::vector<uint8_t>& buffer, std::span<const In> tokens) {
  if constexpr (std::is_same_v<In, Out>) {
    file.write(tokens.data(), tokens.size_bytes());
  } else {
    for (size_t at = 0; at < tokens.size(); at += kChunkTokens) {
      const size_t n = std::min(kChunkTokens, tokens.size() - at);
      buffer.resize(n * sizeof(Out));
      for (size_t i = 0; i < n; ++i) {
        Out v = static_cast<Out>(tokens[at + i]);
        std::memcpy(buffer.data() + i * sizeof(Out), &v, sizeof(Out));
      }
      file.write(buffer.data(), buffer.size());
    }
  }
}

template <typename T>
void LlmcWriter::append(std::span<const T> tokens) {
  if (committed_) throw UsageError(Where{file_.path()}, "the llm.c writer was already committed");
  if (tokens_ + tokens.size() > uint64_t(kLlmcMaxTokens))
    throw Error(Where{file_.path()}, cat("more than ", kLlmcMaxTokens,
                                         " tokens: llm.c's header count is an int32; split the output"));
  const size_t bad = format_ == LlmcFormat::gpt2 ? first_misfit<uint16_t>(tokens) : first_misfit<uint32_t>(tokens);
  if (bad != tokens.size()) {
    const uint64_t index = tokens_ + bad;
    throw Error(Where::at_offset(file_.path(), int64_t(kLlmcHeaderBytes + index * llmc_itemsize(format_))),
                cat("token ", int64_t(tokens[bad]), " (stream index ", index, ") does not fit ",
                    token_type_name(format_), ", the token type of llm.c's ", llmc_format_name(format_), " format"));
  }
  if (format_ == LlmcFormat::gpt2) write_as<uint16_t>(file_, buffer_, tokens);
  else write_as<uint32_t>(file_, buffer_, tokens);
  tokens_ += tokens.size();
}

void LlmcWriter::add(std::span<const uint16_t> t) { append(t); }
void LlmcWriter::add(std::span<const uint32_t> t) { append(t); }
void LlmcWriter::add(std::span<const int32_t> t) { append(t); }
void LlmcWriter::add(std::span<const int64_t> t) { append(t); }

void LlmcWriter::commit() {
  if (committed_) throw UsageError(Where{file_.path()}, "the llm.c writer was already committed");
  int32_t header[kLlmcHeaderInts] = {};
  header[0] = format_ == LlmcFormat::gpt2 ? kLlmcMagicGpt2 : kLlmcMagicLlama3;
  header[1] = format_ == LlmcFormat::gpt2 ? kLlmcVersionGpt2 : kLlmcVersionLlama3;
  header[2] = static_cast<int32_t>(tokens_);
  // The count is known only now: write the header over the placeholder through a second
  // descriptor (the page cache is shared, so commit()'s fsync covers it).
  file_.flush();
  const std::string& tmp = file_.tmp_path();
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) throw_errno("cannot reopen to write the header", tmp);
  ssize_t w = ::pwrite(fd, header, sizeof header, 0);
  int saved = errno;
  ::close(fd);
  if (w != ssize_t(sizeof header)) {
    errno = w < 0 ? saved : EIO;
    throw_errno("cannot write the header", tmp);
  }
  file_.commit();
  committed_ = true;
}

// ---- reader -------------------------------------------------------------------------------------

LlmcReader::LlmcReader(const std::string& path) : file_(path) {
  const uint8_t* p = file_.data();
  const uint64_t size = file_.size();
  expect(size >= kLlmcHeaderBytes, Where::at_offset(path, int64_t(size)), "a 1024-byte llm.c header",
         cat("the end of the file after ", size, " bytes (truncated)"));
  int32_t magic, version, count;
  std::memcpy(&magic, p, 4);
  std::memcpy(&version, p + 4, 4);
  std::memcpy(&count, p + 8, 4);
  if (magic == kLlmcMagicGpt2) format_ = LlmcFormat::gpt2;
  else if (magic == kLlmcMagicLlama3) format_ = LlmcFormat::llama3;
  else
    throw Error(Where::at_offset(path, 0), cat("expected llm.c magic ", kLlmcMagicGpt2, " (gpt-2) or ",
                                               kLlmcMagicLlama3, " (llama-3), found ", magic));
  const int32_t want_version = format_ == LlmcFormat::gpt2 ? kLlmcVersionGpt2 : kLlmcVersionLlama3;
  expect(version == want_version, Where::at_offset(path, 4),
         cat("version ", want_version, " for the ", llmc_format_name(format_), " magic"), cat("version ", version));
  expect(count >= 0, Where::at_offset(path, 8), "a non-negative token count", cat(count));
  const uint64_t expected = kLlmcHeaderBytes + uint64_t(count) * itemsize();
  expect(size == expected, Where::at_offset(path, int64_t(std::min(size, expected))),
         cat(expected, " bytes (header + ", count, " ", token_type_name(format_), " tokens)"),
         cat(size, " bytes", size < expected ? " (truncated)" : " (trailing bytes)"));
  count_ = size_t(count);
  // The tokens start at byte 1024 of a page-aligned map, so they are aligned for their type.
  if (format_ == LlmcFormat::gpt2) tokens16_ = reinterpret_cast<const uint16_t*>(p + kLlmcHeaderBytes);
  else tokens32_ = reinterpret_cast<const uint32_t*>(p + kLlmcHeaderBytes);
}

std::span<const uint16_t> LlmcReader::tokens16() const {
  if (format_ != LlmcFormat::gpt2)
    throw Error(Where{file_.path()}, cat("tokens are uint32 (", llmc_format_name(format_), "), not uint16"));
  return {tokens16_, count_};
}

std::span<const uint32_t> LlmcReader::tokens32() const {
  if (format_ != LlmcFormat::llama3)
    throw Error(Where{file_.path()}, cat("tokens are uint16 (", llmc_format_name(format_), "), not uint32"));
  return {tokens32_, count_};
}

uint64_t count_llmc_tokens(const std::string& path) { return LlmcReader(path).size(); }

void inspect_llmc(const std::string& path, std::ostream& out, int max_records) {
  LlmcReader r(path);
  out << path << ": llm.c token shard (" << llmc_format_name(r.format()) << ")\n"
      << "  magic      " << (r.format() == LlmcFormat::gpt2 ? kLlmcMagicGpt2 : kLlmcMagicLlama3) << "\n"
      << "  version    " << (r.format() == LlmcFormat::gpt2 ? kLlmcVersionGpt2 : kLlmcVersionLlama3) << "\n"
      << "  tokens     " << r.size() << " (" << token_type_name(r.format()) << ")\n"
      << "  bytes      " << kLlmcHeaderBytes + r.size() * r.itemsize() << "\n";
  if (r.format() == LlmcFormat::gpt2) {
    auto t = r.tokens16();
    out << "  EOT (" << kGpt2EotId << ") tokens  " << std::count(t.begin(), t.end(), uint16_t(kGpt2EotId)) << "\n";
  }
  const size_t shown = std::min<size_t>(r.size(), size_t(std::max(max_records, 0)) * 16);
  if (shown) {
    out << "  first " << shown << " tokens:";
    for (size_t i = 0; i < shown; ++i) out << (i % 16 ? " " : "\n   ") << r[i];
    out << "\n";
  }
}

// ---- conversion ---------------------------------------------------------------------------------

template <typename T>
static ConvertStats llmc_stream_to_megatron(std::span<const T> tokens, MegatronWriter& out,
                                            const LlmcToMegatronOptions& options) {
  const size_t cut = options.tokens_per_sequence > 0 ? size_t(options.tokens_per_sequence) : SIZE_MAX;
  auto add_document = [&](std::span<const T> doc) {
    for (size_t at = 0; at < doc.size(); at += cut) out.add_sequence(doc.subspan(at, std::min(cut, doc.size() - at)));
    out.end_document();
  };
  if (options.eot_id < 0 || !std::in_range<T>(options.eot_id)) {
    if (!tokens.empty()) add_document(tokens);
  } else {
    const T eot = static_cast<T>(options.eot_id);
    size_t start = 0;
    while (start < tokens.size()) {
      // The document runs to the next EOT after its first token.
      auto next = std::find(tokens.begin() + start + 1, tokens.end(), eot);
      const size_t end = size_t(next - tokens.begin());
      add_document(tokens.subspan(start, end - start));
      start = end;
    }
  }
  return {out.tokens_written(), out.num_sequences(), out.num_documents()};
}

ConvertStats convert_llmc_to_megatron(const std::string& in, const std::string& out_prefix,
                                      const LlmcToMegatronOptions& options) {
  LlmcReader reader(in);
  const MegatronDType dtype =
      options.dtype.value_or(reader.format() == LlmcFormat::gpt2 ? MegatronDType::u16 : MegatronDType::i32);
  MegatronWriter writer(out_prefix, dtype);
  ConvertStats stats = reader.format() == LlmcFormat::gpt2
                           ? llmc_stream_to_megatron(reader.tokens16(), writer, options)
                           : llmc_stream_to_megatron(reader.tokens32(), writer, options);
  writer.finalize();
  return stats;
}

// Appends one Megatron span to the llm.c writer without widening when the types already agree.
static void add_span(LlmcWriter& out, const TokenSpan& s, std::vector<int32_t>& scratch) {
  switch (s.dtype) {
    case MegatronDType::u16: return out.add(s.as<uint16_t>());
    case MegatronDType::i32: return out.add(s.as<int32_t>());
    case MegatronDType::i64: return out.add(s.as<int64_t>());
    default:
      scratch.resize(s.size);
      s.to_int32(scratch.data());
      return out.add(std::span<const int32_t>(scratch));
  }
}

ConvertStats convert_megatron_to_llmc(const std::string& prefix, const std::string& out_path,
                                      const MegatronToLlmcOptions& options) {
  MegatronReader reader(prefix);
  reader.advise_sequential();
  LlmcWriter writer(out_path, options.format);
  std::vector<int32_t> scratch;
  ConvertStats stats;
  for (size_t d = 0; d < reader.num_documents(); ++d) {
    auto [first, last] = reader.document_range(d);
    // The document's first and last tokens live in its first and last non-empty sequences.
    size_t head = first, tail = last;
    while (head < last && reader.sequence(head).size == 0) ++head;
    while (tail > head && reader.sequence(tail - 1).size == 0) --tail;
    const bool has_tokens = head < last;
    const bool starts_with_eot = has_tokens && reader.sequence(head)[0] == options.eot_id;
    bool drop_last = false;
    if (options.trailing_eod && has_tokens) {
      TokenSpan end = reader.sequence(tail - 1);
      // A document that is just one EOT keeps it: it is its own leading EOT.
      drop_last = end[end.size - 1] == options.eot_id && !(starts_with_eot && head == tail - 1 && end.size == 1);
    }
    try {
      if (!starts_with_eot) writer.add(options.eot_id);
      for (size_t i = first; i < last; ++i) {
        TokenSpan s = reader.sequence(i);
        if (drop_last && i == tail - 1) s = s.sub(0, s.size - 1);
        add_span(writer, s, scratch);
      }
    } catch (const Error& e) {
      throw Error(Where::at_record(reader.bin_path(), int64_t(first)),
                  cat("document ", d, " (sequences ", first, "-", last, "): ", e.what()));
    }
    stats.sequences += last - first;
  }
  stats.documents = reader.num_documents();
  stats.tokens = writer.tokens_written();
  writer.commit();
  return stats;
}

}  // namespace pretrain
