// llm.c token shards (karpathy/llm.c dev/data/data_common.py write_datafile): a header of 256
// little-endian int32 (magic, version, token count, then zeros) followed by the tokens.
// Supported layouts — the two llm.c writes:
//   gpt-2:   magic 20240520, version 1, uint16 tokens (vocabularies up to 65536 ids)
//   llama-3: magic 20240801, version 7, uint32 tokens
// (llm.c has no "version 2"; the uint32 layout is the llama-3 one above.) The header's count is an
// int32, so a file holds fewer than 2^31 tokens, as llm.c asserts.
//
// Also here: conversion between llm.c streams and Megatron indexed datasets for shard-tool.
#pragma once
#include <cstdint>
#include <iosfwd>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "common/file.h"
#include "formats/megatron.h"

namespace pretrain {

enum class LlmcFormat { gpt2, llama3 };

inline constexpr int32_t kLlmcMagicGpt2 = 20240520;
inline constexpr int32_t kLlmcVersionGpt2 = 1;
inline constexpr int32_t kLlmcMagicLlama3 = 20240801;
inline constexpr int32_t kLlmcVersionLlama3 = 7;
inline constexpr size_t kLlmcHeaderInts = 256;
inline constexpr size_t kLlmcHeaderBytes = kLlmcHeaderInts * 4;
inline constexpr int64_t kLlmcMaxTokens = 2147483647;  // the header's count is an int32
inline constexpr int64_t kGpt2EotId = 50256;           // <|endoftext|>

size_t llmc_itemsize(LlmcFormat format);    // 2 or 4
const char* llmc_format_name(LlmcFormat format);  // "gpt-2" / "llama-3"

// Streams tokens to `path` (temp name until commit()); the header, with the final count, is
// written over the placeholder at commit. Abandoned writers leave nothing behind.
class LlmcWriter {
 public:
  explicit LlmcWriter(const std::string& path, LlmcFormat format = LlmcFormat::gpt2);
  LlmcWriter(const LlmcWriter&) = delete;
  LlmcWriter& operator=(const LlmcWriter&) = delete;

  // Appends tokens; each must fit the format's token type, else Error naming the token's index
  // in the stream. A failed call appends nothing.
  void add(std::span<const uint16_t> tokens);
  void add(std::span<const uint32_t> tokens);
  void add(std::span<const int32_t> tokens);
  void add(std::span<const int64_t> tokens);
  void add(int64_t token) { add(std::span<const int64_t>(&token, 1)); }
  void commit();

  const std::string& path() const { return file_.path(); }
  LlmcFormat format() const { return format_; }
  uint64_t tokens_written() const { return tokens_; }

 private:
  template <typename T>
  void append(std::span<const T> tokens);

  AtomicFile file_;
  LlmcFormat format_;
  uint64_t tokens_ = 0;
  std::vector<uint8_t> buffer_;  // converted tokens, written in large pieces
  bool committed_ = false;
};

// Maps an llm.c shard and checks magic, version, a non-negative count, and that the file size is
// exactly the header plus count tokens.
class LlmcReader {
 public:
  explicit LlmcReader(const std::string& path);

  const std::string& path() const { return file_.path(); }
  LlmcFormat format() const { return format_; }
  size_t size() const { return count_; }  // tokens
  size_t itemsize() const { return llmc_itemsize(format_); }
  uint32_t operator[](size_t i) const {
    return format_ == LlmcFormat::gpt2 ? tokens16_[i] : tokens32_[i];
  }
  // The tokens as stored; throws Error for the other format.
  std::span<const uint16_t> tokens16() const;
  std::span<const uint32_t> tokens32() const;

 private:
  MappedFile file_;
  LlmcFormat format_ = LlmcFormat::gpt2;
  size_t count_ = 0;
  const uint16_t* tokens16_ = nullptr;
  const uint32_t* tokens32_ = nullptr;
};

uint64_t count_llmc_tokens(const std::string& path);
// Header fields, sizes, the number of EOT (50256) tokens for gpt-2 files, and the first tokens.
void inspect_llmc(const std::string& path, std::ostream& out, int max_records);

struct ConvertStats {
  uint64_t tokens = 0;
  uint64_t sequences = 0;
  uint64_t documents = 0;
};

struct LlmcToMegatronOptions {
  // llm.c puts EOT before every document (fineweb.py: [eot] + encode(text)), so a document starts
  // at each EOT and keeps that EOT as its first token; tokens before the first EOT, if any, form a
  // first document of their own. eot_id < 0: the whole stream is one document.
  int64_t eot_id = kGpt2EotId;
  // 0: each document is one sequence. N > 0: each document is cut into sequences of at most N.
  int64_t tokens_per_sequence = 0;
  // Default: uint16 for gpt-2 files, int32 for llama-3 files.
  std::optional<MegatronDType> dtype;
};
ConvertStats convert_llmc_to_megatron(const std::string& in, const std::string& out_prefix,
                                      const LlmcToMegatronOptions& options = {});

struct MegatronToLlmcOptions {
  // Every document is written with this token in front (as llm.c's fineweb.py does), unless its
  // first token already is it — so llm.c → Megatron → llm.c gives the original bytes back.
  int64_t eot_id = kGpt2EotId;
  // Documents that end with eot_id (Megatron's preprocess_data.py --append-eod) lose that last
  // token, so the stream has one EOT per boundary, in front, as llm.c expects.
  bool trailing_eod = false;
  LlmcFormat format = LlmcFormat::gpt2;  // gpt-2 refuses ids that do not fit uint16
};
ConvertStats convert_megatron_to_llmc(const std::string& prefix, const std::string& out_path,
                                      const MegatronToLlmcOptions& options = {});

}  // namespace pretrain
