// pretrain._tokenizer: our tokenizers (tokenizer/tokenizer.h) as a Python module, imported as
// pretrain.tokenizer (python/pretrain/tokenizer.py).
//
//   from pretrain.tokenizer import Tokenizer
//   tok = Tokenizer("vocab.txt")                    # or encoder.json, vocab.json, tokenizer.json, *.model
//   tok.encode("Hello world")                       # [7592, 2088]
//   tok.encode_batch(lines)                         # oneTBB workers, the GIL released
//   tok.decode([7592, 2088])                        # "hello world"
//
// Loading is load_tokenizer's, the code the `tokenize` command runs, with its options as keyword
// arguments under the command's names, so the ids are the command's. Every call releases the GIL
// while C++ works (the tokenizer's const members are thread-safe): Python threads encode in
// parallel, and encode_batch spreads one call's texts over oneTBB's workers.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "python/error_translator.h"
#include "tokenizer/tokenizer.h"

namespace py = pybind11;
using pretrain::TokenId;
using pretrain::Tokenizer;

namespace {

// A Python path: str or os.PathLike (pathlib.Path).
std::string fspath(py::handle path) {
  return py::str(py::module_::import("os").attr("fspath")(path)).cast<std::string>();
}

std::unique_ptr<Tokenizer> load(py::handle path, std::optional<bool> lowercase, std::optional<bool> strip_accents,
                                 bool split_cjk, int max_chars_per_word, bool python_compat, size_t bpe_cache_words) {
  pretrain::TokenizerOptions options;
  options.lowercase = lowercase;
  options.strip_accents = strip_accents;
  options.split_cjk = split_cjk;
  options.max_input_chars_per_word = max_chars_per_word;
  options.python_compat = python_compat;
  options.bpe_cache_words = bpe_cache_words;
  std::string p = fspath(path);
  py::gil_scoped_release nogil;  // a 50k-entry vocabulary takes a while
  return pretrain::load_tokenizer(p, options);
}

std::string repr(const Tokenizer& t) {
  return "Tokenizer(kind='" + std::string(t.kind()) + "', vocab_size=" + std::to_string(t.vocab_size()) +
         ", source=" + py::repr(py::str(t.source())).cast<std::string>() + ")";
}

}  // namespace

PYBIND11_MODULE(_tokenizer, m) {
  m.doc() = "WordPiece, GPT-2 byte-level BPE and SentencePiece tokenizers (the `tokenize` command's). See Tokenizer.";
  pretrain::python::register_error_translator();

  py::class_<Tokenizer>(m, "Tokenizer", R"(Tokenizer(path, *, lowercase=None, strip_accents=None, split_cjk=True,
          max_chars_per_word=100, python_compat=False, bpe_cache_words=65536)

path (str or os.PathLike), recognised as the `tokenize` command does:
  vocab.txt                                 WordPiece (BERT)
  encoder.json + vocab.bpe,
  vocab.json + merges.txt                   GPT-2 byte-level BPE (give either file; the other is beside it)
  *.model                                   SentencePiece
  tokenizer.json                            HF's file, WordPiece or BPE model
  a directory                               the first of tokenizer.json, vocab.txt, encoder.json,
                                            vocab.json, *.model in it
WordPiece options: lowercase (None: from tokenizer.json, else lowercase iff the vocabulary has no
uppercase letters), strip_accents (None: follow lowercase), split_cjk, max_chars_per_word (longer
words become [UNK]), python_compat (HF's slow / Google's Python tokenizer where they differ from the
fast one). BPE: bpe_cache_words (0: no word cache).
A missing or malformed file raises RuntimeError naming the file (and line or entry); a bad option
or an id outside the vocabulary raises ValueError.)")
      .def(py::init(&load), py::arg("path"), py::kw_only(), py::arg("lowercase") = py::none(),
           py::arg("strip_accents") = py::none(), py::arg("split_cjk") = true, py::arg("max_chars_per_word") = 100,
           py::arg("python_compat") = false, py::arg("bpe_cache_words") = size_t(1) << 16)
      .def(
          "encode",
          [](const Tokenizer& t, const std::string& text, bool add_special_tokens) {
            py::gil_scoped_release nogil;
            return t.encode(text, add_special_tokens);
          },
          py::arg("text"), py::arg("add_special_tokens") = false,
          "Token ids of text (str, or UTF-8 bytes) as a list of int. add_special_tokens wraps them as the model "
          "does ([CLS] ... [SEP] for BERT; nothing for GPT-2 and SentencePiece).")
      .def(
          "encode_batch",
          [](const Tokenizer& t, const std::vector<std::string>& texts, bool add_special_tokens) {
            py::gil_scoped_release nogil;  // the texts were copied into `texts` with the GIL held
            return t.encode_batch(std::span<const std::string>(texts), add_special_tokens);
          },
          py::arg("texts"), py::arg("add_special_tokens") = false,
          "encode() of every text in a list, on oneTBB's workers with the GIL released; result i is texts[i]'s.")
      .def(
          "tokenize",
          [](const Tokenizer& t, const std::string& text) {
            py::gil_scoped_release nogil;
            return t.tokenize(text);
          },
          py::arg("text"), "The tokens of text as the vocabulary spells them ('##ing', 'Ġthe', '▁the').")
      .def(
          "decode",
          [](const Tokenizer& t, const std::vector<TokenId>& ids, bool skip_special_tokens) {
            py::gil_scoped_release nogil;
            return t.decode(ids, skip_special_tokens);
          },
          py::arg("ids"), py::arg("skip_special_tokens") = false,
          "ids (a sequence of int) back to text; skip_special_tokens leaves the special tokens out. "
          "An id outside the vocabulary raises ValueError.")
      .def("token_to_id", &Tokenizer::token_to_id, py::arg("token"), "The id of a vocabulary entry, or None.")
      .def("id_to_token", &Tokenizer::id_to_token, py::arg("id"), "The vocabulary entry of an id.")
      .def_property_readonly("kind", [](const Tokenizer& t) { return std::string(t.kind()); },
                             "'wordpiece', 'bpe' or 'sentencepiece' (the manifest's tokenizer kind).")
      .def_property_readonly("vocab_size", &Tokenizer::vocab_size)
      .def_property_readonly("special_ids", &Tokenizer::special_ids,
                             "The special tokens' ids by role: {'cls': 101, 'sep': 102, ...}.")
      .def_property_readonly("source", &Tokenizer::source, "The file(s) it was loaded from.")
      .def_property_readonly("vocab_hash", [](const Tokenizer& t) { return t.info().vocab_hash; },
                             "xxh3 of the files it was loaded from, as the shards' manifest records it.")
      .def("__len__", &Tokenizer::vocab_size)
      .def("__repr__", &repr);
}
