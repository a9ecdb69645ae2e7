#include "tokenizer/tokenize_tool.h"

#include <charconv>
#include <vector>

#include <tbb/parallel_for.h>

#include "common/error.h"
#include "common/progress.h"

namespace pretrain {
namespace {

// Reads up to max_lines lines; false when the input had nothing left.
bool read_batch(std::istream& in, size_t max_lines, std::vector<std::string>& lines, uint64_t& bytes) {
  lines.clear();
  std::string line;
  while (lines.size() < max_lines && std::getline(in, line)) {
    bytes += line.size() + (in.eof() ? 0 : 1);
    if (!line.empty() && line.back() == '\r') line.pop_back();
    lines.push_back(std::move(line));
  }
  return !lines.empty();
}

std::vector<TokenId> parse_ids(const std::string& line, const TokenizeToolOptions& options, uint64_t line_no) {
  std::vector<TokenId> ids;
  const char* p = line.data();
  const char* end = p + line.size();
  while (p < end) {
    while (p < end && (*p == ' ' || *p == '\t')) ++p;
    if (p == end) break;
    TokenId id = 0;
    auto [next, ec] = std::from_chars(p, end, id);
    if (ec != std::errc() || (next < end && *next != ' ' && *next != '\t'))
      throw Error(Where::at_line(options.input_name, static_cast<int64_t>(line_no)),
                  cat("expected space-separated token ids, found \"", std::string(p, std::min<size_t>(end - p, 20)), "\""));
    ids.push_back(id);
    p = next;
  }
  return ids;
}

}  // namespace

TokenizeToolStats run_tokenize(const Tokenizer& tokenizer, const TokenizeToolOptions& options, std::istream& in,
                               std::ostream& out) {
  TokenizeToolStats stats;
  Progress progress("tokenize", 0, Progress::Unit::bytes);
  std::vector<std::string> lines;
  std::string buffer;
  while (read_batch(in, options.batch_lines, lines, stats.bytes)) {
    buffer.clear();
    if (options.output == TokenizeToolOptions::Output::decode) {
      for (size_t i = 0; i < lines.size(); ++i) {
        std::vector<TokenId> ids = parse_ids(lines[i], options, stats.lines + i + 1);
        for (TokenId id : ids)
          if (id < 0 || id >= tokenizer.vocab_size())
            throw Error(Where::at_line(options.input_name, static_cast<int64_t>(stats.lines + i + 1)),
                        cat("token id ", id, " is outside the vocabulary (size ", tokenizer.vocab_size(), ")"));
        buffer += tokenizer.decode(ids, options.skip_special_tokens);
        buffer += '\n';
      }
    } else if (options.output == TokenizeToolOptions::Output::tokens && !options.add_special_tokens) {
      // tokenize_into, not id_to_token: SentencePiece shows an unknown piece as its text (as
      // spm_encode --output_format=piece does), not as "<unk>".
      std::vector<std::vector<std::string>> tokens(lines.size());
      tbb::parallel_for(tbb::blocked_range<size_t>(0, lines.size(), 16), [&](const tbb::blocked_range<size_t>& r) {
        for (size_t i = r.begin(); i != r.end(); ++i) tokenizer.tokenize_into(lines[i], tokens[i]);
      });
      for (const auto& line_tokens : tokens) {
        stats.tokens += line_tokens.size();
        for (size_t k = 0; k < line_tokens.size(); ++k) {
          if (k) buffer += ' ';
          buffer += line_tokens[k];
        }
        buffer += '\n';
      }
    } else {
      auto encoded = tokenizer.encode_batch(std::span<const std::string>(lines), options.add_special_tokens);
      for (const auto& ids : encoded) {
        stats.tokens += ids.size();
        for (size_t k = 0; k < ids.size(); ++k) {
          if (k) buffer += ' ';
          if (options.output == TokenizeToolOptions::Output::ids)
            buffer += std::to_string(ids[k]);
          else
            buffer += tokenizer.id_to_token(ids[k]);
        }
        buffer += '\n';
      }
    }
    out.write(buffer.data(), static_cast<std::streamsize>(buffer.size()));
    if (!out) throw Error("cannot write the output (disk full or closed pipe?)");
    stats.lines += lines.size();
    progress.set(stats.bytes);
    progress.set_note(cat(stats.lines, " lines"));
  }
  if (in.bad()) throw Error(Where{options.input_name}, "read error");
  progress.finish();
  return stats;
}

}  // namespace pretrain
