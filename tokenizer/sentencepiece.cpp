// SentencePiece: libsentencepiece's processor behind the Tokenizer interface. The library does the
// whole pipeline itself (its normalizer is the model's precompiled NFKC-like charmap, whitespace
// becomes "▁" instead of a pre-tokenizer, then unigram or BPE); what we add is defined behaviour on
// invalid UTF-8 and HF's decode/skip_special_tokens conventions. Ids equal `spm_encode
// --output_format=id` (no bos/eos, no sampling) for valid UTF-8 input.
#include "tokenizer/sentencepiece.h"

#include <sentencepiece_processor.h>

#include "common/error.h"
#include "common/utf8.h"

namespace pretrain {
namespace {

class SentencePieceTokenizer final : public Tokenizer {
 public:
  explicit SentencePieceTokenizer(const std::string& model_path) {
    // Load checks the file is a ModelProto the library can use; its status message says what is
    // wrong ("Not found: …", "Internal: … ParseFromArray failed").
    auto status = processor_.Load(model_path);
    if (!status.ok())
      throw Error(Where{model_path}, cat("cannot load the SentencePiece model: ", status.ToString()));
    if (processor_.GetPieceSize() <= 0) throw Error(Where{model_path}, "the SentencePiece model has no pieces");
    for (auto [role, id] : {std::pair{"unk", processor_.unk_id()}, std::pair{"bos", processor_.bos_id()},
                            std::pair{"eos", processor_.eos_id()}, std::pair{"pad", processor_.pad_id()}})
      if (id >= 0 && id < processor_.GetPieceSize()) special_[role] = id;
  }

  std::string_view kind() const override { return "sentencepiece"; }

  void encode_into(std::string_view text, std::vector<TokenId>& ids) const override {
    std::string normalized = normalize(text);
    // Model: the library's normalizer, "▁" whitespace handling and segmentation in one call.
    // Encode is const and keeps its state on the stack, so one processor serves every worker.
    std::vector<int> out;
    auto status = processor_.Encode(normalized, &out);
    if (!status.ok()) throw Error(Where{source()}, cat("SentencePiece encode failed: ", status.ToString()));
    ids.insert(ids.end(), out.begin(), out.end());
  }

  void tokenize_into(std::string_view text, std::vector<std::string>& tokens) const override {
    std::vector<std::string> pieces;
    auto status = processor_.Encode(normalize(text), &pieces);
    if (!status.ok()) throw Error(Where{source()}, cat("SentencePiece encode failed: ", status.ToString()));
    for (auto& p : pieces) tokens.push_back(std::move(p));
  }

  // The library's DecodeIds already makes control symbols (<s>, </s>, <pad>) invisible and shows
  // <unk> as " ⁇ ". skip_special_tokens drops every special id (unk included, as HF does);
  // without it the control symbols are shown as their pieces, the rest decoded as spm_decode does.
  std::string decode(std::span<const TokenId> ids, bool skip_special_tokens) const override {
    std::string text;
    std::vector<int> run;
    auto flush = [&] {
      if (run.empty()) return;
      std::string part;
      auto status = processor_.Decode(run, &part);
      if (!status.ok()) throw Error(Where{source()}, cat("SentencePiece decode failed: ", status.ToString()));
      // The library drops the "▁" of the text's first piece; a run after a shown control symbol
      // is not the text's start, so that space comes back.
      if (!text.empty() && processor_.IdToPiece(run.front()).starts_with("\xE2\x96\x81") &&
          !part.starts_with(' '))
        text += ' ';
      text += part;
      run.clear();
    };
    for (TokenId id : ids) {
      if (id < 0 || id >= processor_.GetPieceSize())
        throw UsageError(Where{source()}, cat("token id ", id, " is outside the vocabulary (size ", vocab_size(), ")"));
      if (skip_special_tokens && is_special(id)) continue;
      if (processor_.IsControl(id)) {
        flush();
        text += processor_.IdToPiece(id);
        continue;
      }
      run.push_back(id);
    }
    flush();
    return text;
  }

  // PieceToId answers unk_id for pieces it does not know; only "<unk>" itself maps there. No piece
  // is empty, and the library's trie takes length 0 as "up to the NUL" (strlen on the view's data:
  // a crash on a null view, found by fuzz_sentencepiece), so "" is answered here.
  std::optional<TokenId> token_to_id(std::string_view token) const override {
    if (token.empty()) return std::nullopt;
    int id = processor_.PieceToId(token);
    if (id < 0 || id >= processor_.GetPieceSize()) return std::nullopt;
    if (id == processor_.unk_id() && processor_.IdToPiece(id) != token) return std::nullopt;
    return id;
  }

  std::string id_to_token(TokenId id) const override {
    if (id < 0 || id >= processor_.GetPieceSize())
      throw UsageError(Where{source()}, cat("token id ", id, " is outside the vocabulary (size ", vocab_size(), ")"));
    return processor_.IdToPiece(id);
  }

  int64_t vocab_size() const override { return processor_.GetPieceSize(); }
  const std::map<std::string, TokenId>& special_ids() const override { return special_; }

 private:
  // Normalizer, our part: the library reads each invalid byte as its own U+FFFD; we repair first so
  // every stage reads invalid UTF-8 the same way (one U+FFFD per maximal invalid subpart).
  static std::string normalize(std::string_view text) {
    std::string repaired(text);
    repair_utf8(repaired);
    return repaired;
  }

  sentencepiece::SentencePieceProcessor processor_;
  std::map<std::string, TokenId> special_;
};

}  // namespace

std::unique_ptr<Tokenizer> make_sentencepiece_tokenizer(const std::string& model_path, const TokenizerOptions&) {
  return std::make_unique<SentencePieceTokenizer>(model_path);
}

}  // namespace pretrain
