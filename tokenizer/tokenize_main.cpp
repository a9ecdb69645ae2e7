// tokenize: one line of text in, one line of token ids (or tokens) out, with any tokenizer
// load_tokenizer recognises. The work is in tokenize_tool.cpp.
#include <fstream>
#include <iostream>
#include <optional>

#include "common/cli.h"
#include "common/error.h"
#include "common/file.h"
#include "tokenizer/tokenize_tool.h"

int main(int argc, char** argv) {
  using namespace pretrain;
  CLI::App app{"Tokenize text, one line in, one line out: space-separated ids (--ids, the default) or "
               "tokens (--tokens); --decode turns lines of ids back into text",
               "tokenize"};
  ToolOptions common(app);
  std::string path, input = "-", output = "-";
  TokenizerOptions tok_options;
  TokenizeToolOptions options;
  bool tokens = false, decode = false, ids = false;
  bool lowercase = false;
  app.add_option("--tokenizer", path,
                 "vocab.txt (WordPiece), encoder.json/vocab.json + vocab.bpe/merges.txt (GPT-2 BPE), "
                 "*.model (SentencePiece), HF tokenizer.json, or a directory holding one")
      ->required();
  app.add_option("-i,--input", input, "input text file (- for stdin)")->capture_default_str();
  app.add_option("-o,--output", output, "output file (- for stdout)")->capture_default_str();
  auto* ids_flag = app.add_flag("--ids", ids, "write token ids (default)");
  auto* tokens_flag = app.add_flag("--tokens", tokens, "write tokens instead of ids");
  auto* decode_flag = app.add_flag("--decode", decode, "read lines of ids and write the decoded text");
  ids_flag->excludes(tokens_flag)->excludes(decode_flag);
  tokens_flag->excludes(decode_flag);
  app.add_flag("--add-special-tokens", options.add_special_tokens,
               "wrap each line with the model's special tokens ([CLS] … [SEP] for BERT)");
  app.add_flag("--skip-special-tokens", options.skip_special_tokens, "--decode: leave special tokens out");
  // A plain bool and count(): CLI11 sets an absent flag's std::optional<bool> to false.
  auto* lowercase_flag = app.add_flag("--lowercase,!--no-lowercase", lowercase,
               "WordPiece: lowercase (default: when the vocabulary has no uppercase letters)");
  app.add_option("--max-chars-per-word", tok_options.max_input_chars_per_word,
                 "WordPiece: longer words become [UNK] (HF: 100, Google: 200)")
      ->capture_default_str();
  app.add_flag("--python-compat", tok_options.python_compat,
               "WordPiece: behave as HF's slow / Google's Python tokenizer where it differs from the fast one");
  return run_tool(app, argc, argv, [&] {
    if (lowercase_flag->count() > 0) tok_options.lowercase = lowercase;
    if (tokens) options.output = TokenizeToolOptions::Output::tokens;
    if (decode) options.output = TokenizeToolOptions::Output::decode;
    auto tokenizer = load_tokenizer(path, tok_options);
    std::ifstream in_file;
    std::ofstream out_file;
    std::optional<AtomicFile> out_atomic;  // -o FILE appears only when the whole input went through
    if (input != "-") {
      in_file.open(input, std::ios::binary);
      if (!in_file) throw_errno("cannot open", input);
      options.input_name = input;
    }
    if (output != "-") {
      out_atomic.emplace(output, /*open_fd=*/false);
      out_file.open(out_atomic->tmp_path(), std::ios::binary | std::ios::trunc);
      if (!out_file) throw_errno("cannot create", out_atomic->tmp_path());
    }
    std::ios::sync_with_stdio(false);
    run_tokenize(*tokenizer, options, input == "-" ? std::cin : in_file, output == "-" ? std::cout : out_file);
    if (output != "-") {
      out_file.close();
      if (!out_file) throw Error(Where{output}, "write failed");
      out_atomic->commit();
    }
    return 0;
  });
}
