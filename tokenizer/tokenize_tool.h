// The `tokenize` command's work: text lines in, one line of ids or tokens out per line, in order,
// encoded in batches on oneTBB workers. `--decode` goes the other way (ids in, text out).
#pragma once
#include <cstdint>
#include <istream>
#include <ostream>
#include <string>

#include "tokenizer/tokenizer.h"

namespace pretrain {

struct TokenizeToolOptions {
  enum class Output { ids, tokens, decode };
  Output output = Output::ids;
  bool add_special_tokens = false;
  bool skip_special_tokens = false;  // --decode only
  size_t batch_lines = 8192;         // lines encoded together (bounded memory, full workers)
  std::string input_name = "<stdin>";  // for messages
};

struct TokenizeToolStats {
  uint64_t lines = 0;
  uint64_t bytes = 0;
  uint64_t tokens = 0;
};

// A line is the bytes up to '\n'; one trailing '\r' is dropped (CRLF files). A last line without
// '\n' still counts. Empty lines give empty output lines.
TokenizeToolStats run_tokenize(const Tokenizer& tokenizer, const TokenizeToolOptions& options, std::istream& in,
                               std::ostream& out);

}  // namespace pretrain
