// The SentencePiece ModelProto (what spm.model holds) read field by field, and HF tokenizers'
// tokenizer.json made from it, so an exported model's AutoTokenizer gives spm_encode's ids without
// the sentencepiece Python package.
//
// Debian's libsentencepiece-dev ships no sentencepiece_model.pb.h, and linking protobuf for five
// fields would tie us to its version; the wire format is small and stable, so a reader for just
// the fields we use lives here (field numbers from sentencepiece_model.proto). Unknown fields are
// skipped, as protobuf does; proto2 defaults apply to absent ones.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace pretrain {

struct SentencePieceModelProto {
  // ModelProto.SentencePiece.Type.
  enum class PieceType : int { normal = 1, unknown = 2, control = 3, user_defined = 4, unused = 5, byte = 6 };
  // TrainerSpec.ModelType.
  enum class ModelType : int { unigram = 1, bpe = 2, word = 3, character = 4 };

  struct Piece {
    std::string piece;
    float score = 0;
    PieceType type = PieceType::normal;
  };
  std::vector<Piece> pieces;  // ModelProto.pieces (1); the index is the id

  // TrainerSpec (2): what encoding depends on.
  ModelType model_type = ModelType::unigram;  // 3
  int32_t vocab_size = 8000;                  // 4
  bool split_by_whitespace = true;            // 22
  bool treat_whitespace_as_suffix = false;    // 24
  bool byte_fallback = false;                 // 35
  int32_t unk_id = 0, bos_id = 1, eos_id = 2, pad_id = -1;  // 40..43
  std::string unk_piece = "<unk>";                           // 45

  // NormalizerSpec (3).
  std::string normalizer_name;               // 1: "nmt_nfkc", "identity", …
  std::string precompiled_charsmap;          // 2: the normalization trie (empty: identity)
  bool add_dummy_prefix = true;              // 3
  bool remove_extra_whitespaces = true;      // 4
  bool escape_whitespaces = true;            // 5
};

// Parses serialized ModelProto bytes; `file` names them in errors. A truncated or malformed message
// is an Error naming the file and the byte offset where the bad field starts.
SentencePieceModelProto parse_sentencepiece_model(std::string_view bytes, const std::string& file);
SentencePieceModelProto read_sentencepiece_model(const std::string& path);

// HF tokenizers' tokenizer.json for the model at model_path (the format
// PreTrainedTokenizerFast(tokenizer_file=…) loads), laid out as transformers' SpmConverter does:
// Unigram (or BPE with merges from the vocabulary), the precompiled charsmap as a Precompiled
// normalizer, Metaspace for "▁", control and user-defined pieces as added tokens. It differs from
// SpmConverter where that one is not spm_encode (stripping all whitespace, a dummy prefix after
// every added token), so that the ids are spm_encode's on ordinary text; text that spells a
// control or user-defined piece literally ("</s>") can still differ, as with any HF conversion.
// Throws UsageError naming the file for models HF cannot express: word and char model types,
// whitespace as suffix, unescaped whitespace.
std::string sentencepiece_to_hf_json(const std::string& model_path);

}  // namespace pretrain
