#include "tokenizer/sentencepiece_model.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <map>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "common/file.h"

namespace pretrain {
namespace {

// Protobuf wire types (the low 3 bits of a tag).
constexpr int kVarint = 0, kFixed64 = 1, kBytes = 2, kFixed32 = 5;

struct Field {
  uint32_t number = 0;
  int wire = 0;
  int64_t offset = 0;  // where the tag starts, from the start of the file
  uint64_t varint = 0;
  uint32_t fixed32 = 0;
  std::string_view bytes;
  int64_t bytes_offset = 0;  // where `bytes` starts in the file, for the nested message's errors
};

// One message's fields in order; `base` is the message's offset in the file, so every error
// points at the byte where the bad field starts.
class WireReader {
 public:
  WireReader(std::string_view data, const std::string& file, int64_t base) : data_(data), file_(file), base_(base) {}

  bool done() const { return pos_ >= data_.size(); }

  Field next() {
    Field f;
    f.offset = base_ + int64_t(pos_);
    const uint64_t tag = varint(f.offset, "a field tag");
    f.number = uint32_t(tag >> 3);
    f.wire = int(tag & 7);
    if (f.number == 0 || tag >> 32)
      fail(f.offset, cat("a field tag with a field number in 1..2^29-1, not ", tag >> 3));
    switch (f.wire) {
      case kVarint: f.varint = varint(f.offset, cat("field ", f.number, "'s varint")); break;
      case kFixed64: take(8, f.offset, cat("field ", f.number, "'s 8 bytes")); break;
      case kFixed32: {
        const std::string_view b = take(4, f.offset, cat("field ", f.number, "'s 4 bytes"));
        for (int i = 3; i >= 0; --i) f.fixed32 = (f.fixed32 << 8) | uint8_t(b[size_t(i)]);  // little-endian
        break;
      }
      case kBytes: {
        const uint64_t n = varint(f.offset, cat("field ", f.number, "'s length"));
        f.bytes_offset = base_ + int64_t(pos_);
        f.bytes = take(n, f.offset, cat("field ", f.number, "'s ", n, " bytes"));
        break;
      }
      default:
        fail(f.offset, cat("field ", f.number, " with wire type 0, 1, 2 or 5, not ", f.wire,
                           " (groups are not used by ModelProto)"));
    }
    return f;
  }

  // A known field whose wire type is not the one the .proto gives it: the bytes are not a ModelProto.
  [[noreturn]] void wrong_type(const Field& f, int expected) const {
    fail(f.offset, cat("field ", f.number, " with wire type ", expected, ", not ", f.wire));
  }

  [[noreturn]] void fail(int64_t offset, const std::string& expected) const {
    throw Error(Where::at_offset(file_, offset), cat("malformed SentencePiece model: expected ", expected));
  }

 private:
  uint64_t varint(int64_t field_offset, const std::string& what) {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (pos_ >= data_.size()) fail(field_offset, cat(what, ", found the end of the message"));
      const uint8_t b = uint8_t(data_[pos_++]);
      v |= uint64_t(b & 0x7f) << shift;
      if (!(b & 0x80)) return v;
    }
    fail(field_offset, cat(what, " of at most 10 bytes"));
  }

  std::string_view take(uint64_t n, int64_t field_offset, const std::string& what) {
    if (n > data_.size() - pos_)
      fail(field_offset, cat(what, ", found ", data_.size() - pos_, " before the end of the message"));
    const std::string_view out = data_.substr(pos_, size_t(n));
    pos_ += size_t(n);
    return out;
  }

  std::string_view data_;
  const std::string& file_;
  int64_t base_;
  size_t pos_ = 0;
};

// proto2 int32: negative values are sign-extended 10-byte varints, so the low 32 bits are the value.
int32_t as_int32(uint64_t v) { return static_cast<int32_t>(static_cast<uint32_t>(v)); }

void parse_piece(const Field& outer, const std::string& file, SentencePieceModelProto& m) {
  WireReader r(outer.bytes, file, outer.bytes_offset);
  SentencePieceModelProto::Piece p;
  while (!r.done()) {
    const Field f = r.next();
    switch (f.number) {
      case 1:
        if (f.wire != kBytes) r.wrong_type(f, kBytes);
        p.piece = std::string(f.bytes);
        break;
      case 2:
        if (f.wire != kFixed32) r.wrong_type(f, kFixed32);
        p.score = std::bit_cast<float>(f.fixed32);
        break;
      case 3:
        if (f.wire != kVarint) r.wrong_type(f, kVarint);
        if (f.varint < 1 || f.varint > 6) r.fail(f.offset, cat("a piece type in 1..6, not ", f.varint));
        p.type = SentencePieceModelProto::PieceType(int(f.varint));
        break;
      default: break;
    }
  }
  m.pieces.push_back(std::move(p));
}

void parse_trainer_spec(const Field& outer, const std::string& file, SentencePieceModelProto& m) {
  WireReader r(outer.bytes, file, outer.bytes_offset);
  while (!r.done()) {
    const Field f = r.next();
    auto varint = [&] {
      if (f.wire != kVarint) r.wrong_type(f, kVarint);
      return f.varint;
    };
    switch (f.number) {
      case 3: {
        const uint64_t t = varint();
        if (t < 1 || t > 4) r.fail(f.offset, cat("a model type in 1..4 (unigram, bpe, word, char), not ", t));
        m.model_type = SentencePieceModelProto::ModelType(int(t));
        break;
      }
      case 4: m.vocab_size = as_int32(varint()); break;
      case 22: m.split_by_whitespace = varint() != 0; break;
      case 24: m.treat_whitespace_as_suffix = varint() != 0; break;
      case 35: m.byte_fallback = varint() != 0; break;
      case 40: m.unk_id = as_int32(varint()); break;
      case 41: m.bos_id = as_int32(varint()); break;
      case 42: m.eos_id = as_int32(varint()); break;
      case 43: m.pad_id = as_int32(varint()); break;
      case 45:
        if (f.wire != kBytes) r.wrong_type(f, kBytes);
        m.unk_piece = std::string(f.bytes);
        break;
      default: break;
    }
  }
}

void parse_normalizer_spec(const Field& outer, const std::string& file, SentencePieceModelProto& m) {
  WireReader r(outer.bytes, file, outer.bytes_offset);
  while (!r.done()) {
    const Field f = r.next();
    auto flag = [&] {
      if (f.wire != kVarint) r.wrong_type(f, kVarint);
      return f.varint != 0;
    };
    auto bytes = [&] {
      if (f.wire != kBytes) r.wrong_type(f, kBytes);
      return std::string(f.bytes);
    };
    switch (f.number) {
      case 1: m.normalizer_name = bytes(); break;
      case 2: m.precompiled_charsmap = bytes(); break;
      case 3: m.add_dummy_prefix = flag(); break;
      case 4: m.remove_extra_whitespaces = flag(); break;
      case 5: m.escape_whitespaces = flag(); break;
      default: break;
    }
  }
}

std::string base64(std::string_view in) {
  static constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((in.size() + 2) / 3 * 4);
  for (size_t i = 0; i < in.size(); i += 3) {
    const size_t n = std::min<size_t>(3, in.size() - i);
    uint32_t v = 0;
    for (size_t k = 0; k < 3; ++k) v = (v << 8) | (k < n ? uint8_t(in[i + k]) : 0u);
    for (size_t k = 0; k < 4; ++k) out += k <= n ? kAlphabet[(v >> (18 - 6 * k)) & 63] : '=';
  }
  return out;
}

using ordered_json = nlohmann::ordered_json;
using Type = SentencePieceModelProto::PieceType;

ordered_json replace(const char* regex, const char* content) {
  return {{"type", "Replace"}, {"pattern", {{"Regex", regex}}}, {"content", content}};
}

// spm's normalizer: the charsmap per character, then (remove_extra_whitespaces) no space at either
// end and none twice in a row. Only ' ' counts, as in spm: SpmConverter's Strip also takes tabs
// and other Unicode spaces that an identity charsmap keeps. A leading space is kept when spm adds
// its dummy "▁": Metaspace adds one only at the original text's offset 0 and only when none is
// there, so a stripped leading space would lose the prefix and a kept one stands in for it.
ordered_json normalizer(const SentencePieceModelProto& m) {
  ordered_json steps = ordered_json::array();
  if (!m.precompiled_charsmap.empty())
    steps.push_back({{"type", "Precompiled"}, {"precompiled_charsmap", base64(m.precompiled_charsmap)}});
  if (m.remove_extra_whitespaces) {
    steps.push_back(replace(" {2,}", " "));
    steps.push_back(replace(m.add_dummy_prefix ? " $" : "^ | $", ""));
  }
  // Text that starts with a "▁" of its own still gets spm's dummy one ("▁▁…"); Metaspace would
  // take that "▁" for the prefix.
  if (m.add_dummy_prefix) steps.push_back(replace("^\u2581", " \u2581"));
  if (steps.empty()) return nullptr;
  return {{"type", "Sequence"}, {"normalizers", steps}};
}

// BPE merges from the vocabulary, as transformers' generate_merges: every split of a piece into
// two pieces, highest-scoring piece first. spm merges the adjacent pair whose concatenation scores
// highest (leftmost on ties); HF merges the lowest-ranked pair (leftmost on ties): the same order.
// Only pieces spm's BPE merges into (normal, user-defined) take part.
ordered_json bpe_merges(const SentencePieceModelProto& m) {
  std::unordered_map<std::string_view, int> id;
  for (size_t i = 0; i < m.pieces.size(); ++i) id.emplace(m.pieces[i].piece, int(i));
  struct Merge {
    float score;
    int piece, left, right;
    size_t split;
  };
  std::vector<Merge> merges;
  for (size_t i = 0; i < m.pieces.size(); ++i) {
    const auto& p = m.pieces[i];
    if (p.type != Type::normal && p.type != Type::user_defined) continue;
    const std::string_view s = p.piece;
    for (size_t cut = 1; cut < s.size(); ++cut) {
      if ((uint8_t(s[cut]) & 0xC0) == 0x80) continue;  // inside a UTF-8 character
      auto l = id.find(s.substr(0, cut)), r = id.find(s.substr(cut));
      if (l != id.end() && r != id.end()) merges.push_back({p.score, int(i), l->second, r->second, cut});
    }
  }
  std::stable_sort(merges.begin(), merges.end(), [](const Merge& a, const Merge& b) {
    if (a.score != b.score) return a.score > b.score;
    if (a.piece != b.piece) return a.piece < b.piece;
    return std::pair(a.left, a.right) < std::pair(b.left, b.right);
  });
  ordered_json out = ordered_json::array();
  for (const Merge& mg : merges) {
    const std::string& s = m.pieces[size_t(mg.piece)].piece;
    out.push_back(ordered_json::array({s.substr(0, mg.split), s.substr(mg.split)}));
  }
  return out;
}

}  // namespace

SentencePieceModelProto parse_sentencepiece_model(std::string_view bytes, const std::string& file) {
  SentencePieceModelProto m;
  WireReader r(bytes, file, 0);
  while (!r.done()) {
    const Field f = r.next();
    if (f.number >= 1 && f.number <= 3 && f.wire != kBytes) r.wrong_type(f, kBytes);
    switch (f.number) {
      case 1: parse_piece(f, file, m); break;
      case 2: parse_trainer_spec(f, file, m); break;
      case 3: parse_normalizer_spec(f, file, m); break;
      default: break;  // self-test data, the denormalizer: not needed to encode
    }
  }
  if (m.pieces.empty()) throw Error(Where{file}, "malformed SentencePiece model: expected pieces, found none");
  if (m.unk_id < 0 || size_t(m.unk_id) >= m.pieces.size())
    throw Error(Where{file}, cat("malformed SentencePiece model: expected unk_id in [0, ", m.pieces.size(),
                                 "), found ", m.unk_id));
  return m;
}

SentencePieceModelProto read_sentencepiece_model(const std::string& path) {
  return parse_sentencepiece_model(read_file(path), path);
}

std::string sentencepiece_to_hf_json(const std::string& model_path) {
  const SentencePieceModelProto m = read_sentencepiece_model(model_path);
  auto refuse = [&](const std::string& why) {
    throw UsageError(Where{model_path}, cat("HF tokenizers cannot express this SentencePiece model: ", why));
  };
  using Model = SentencePieceModelProto::ModelType;
  if (m.model_type != Model::unigram && m.model_type != Model::bpe)
    refuse(cat("model type ", int(m.model_type), " (word or char); only unigram and bpe convert"));
  if (m.treat_whitespace_as_suffix) refuse("treat_whitespace_as_suffix (Metaspace puts \"\u2581\" in front)");
  if (!m.escape_whitespaces) refuse("escape_whitespaces is off (Metaspace always turns ' ' into \"\u2581\")");
  for (size_t i = 0; i < m.pieces.size(); ++i)
    if (m.pieces[i].type == Type::unused)
      refuse(cat("piece ", i, " '", m.pieces[i].piece, "' is UNUSED, which spm never outputs and HF's models would"));

  // Control pieces (<s>, </s>) are special added tokens, user-defined ones plain added tokens
  // (spm keeps both whole and never normalizes them), as SpmConverter does.
  ordered_json added = ordered_json::array();
  for (size_t i = 0; i < m.pieces.size(); ++i) {
    const auto& p = m.pieces[i];
    if (p.type != Type::control && p.type != Type::user_defined) continue;
    added.push_back({{"id", i},
                     {"content", p.piece},
                     {"single_word", false},
                     {"lstrip", false},
                     {"rstrip", false},
                     {"normalized", false},
                     {"special", p.type == Type::control}});
  }

  ordered_json model;
  if (m.model_type == Model::unigram) {
    ordered_json vocab = ordered_json::array();
    for (const auto& p : m.pieces) vocab.push_back(ordered_json::array({p.piece, double(p.score)}));
    model = {{"type", "Unigram"}, {"unk_id", m.unk_id}, {"vocab", vocab}, {"byte_fallback", m.byte_fallback}};
  } else {
    ordered_json vocab = ordered_json::object();
    for (size_t i = 0; i < m.pieces.size(); ++i) vocab[m.pieces[i].piece] = i;
    model = {{"type", "BPE"},
             {"dropout", nullptr},
             {"unk_token", m.pieces[size_t(m.unk_id)].piece},
             {"continuing_subword_prefix", nullptr},
             {"end_of_word_suffix", nullptr},
             {"fuse_unk", true},
             {"byte_fallback", m.byte_fallback},
             {"ignore_merges", false},
             {"vocab", vocab},
             {"merges", bpe_merges(m)}};
  }

  // "first", not SpmConverter's "always": spm adds its dummy "▁" once, at the text's start, not
  // again after every added token that splits the text.
  const char* prepend = m.add_dummy_prefix ? "first" : "never";
  const ordered_json metaspace = {
      {"type", "Metaspace"}, {"replacement", "\u2581"}, {"prepend_scheme", prepend}, {"split", m.split_by_whitespace}};
  ordered_json decoder = metaspace;
  if (m.byte_fallback)  // <0xNN> pieces back to bytes before "▁" becomes ' '
    decoder = {{"type", "Sequence"},
               {"decoders", ordered_json::array({{{"type", "ByteFallback"}}, {{"type", "Fuse"}}, metaspace})}};

  const ordered_json doc = {{"version", "1.0"},       {"truncation", nullptr},       {"padding", nullptr},
                            {"added_tokens", added},  {"normalizer", normalizer(m)}, {"pre_tokenizer", metaspace},
                            {"post_processor", nullptr}, {"decoder", decoder},        {"model", model}};
  try {
    return doc.dump(1, ' ', false, nlohmann::json::error_handler_t::strict) + "\n";
  } catch (const nlohmann::json::exception&) {  // a piece that is not UTF-8: JSON cannot hold it
    throw Error(Where{model_path}, "malformed SentencePiece model: expected UTF-8 pieces, found invalid bytes");
  }
}

}  // namespace pretrain
