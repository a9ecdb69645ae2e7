// train-tokenizer: a WordPiece vocabulary (vocab.txt, as HF's BertWordPieceTokenizer.train) or a
// SentencePiece model (spm.model + spm.vocab, libsentencepiece's trainer) from our document shards
// or plain text. The training is in train_wordpiece.cpp / train_sentencepiece.cpp; this file turns
// the inputs into one stream of text for them.
#include <chrono>
#include <fstream>
#include <iostream>

#include "common/cli.h"
#include "common/error.h"
#include "common/file.h"
#include "common/log.h"
#include "common/progress.h"
#include "formats/doc_shards.h"
#include "tokenizer/train_sentencepiece.h"
#include "tokenizer/train_wordpiece.h"

namespace {

using namespace pretrain;

bool is_plain_text(const std::string& path) { return path.size() >= 4 && path.compare(path.size() - 4, 4, ".txt") == 0; }

struct TextStats {
  uint64_t documents = 0, lines = 0, bytes = 0;
};

// The inputs in order: a .txt file (or glob of them) gives its lines (one sentence per line, as
// Google's BERT text files); anything else is read by DocReader (shard directories with
// manifest.json, docs-*.jsonl.zst, wikiextractor output …) and gives each document's paragraphs.
TextSource make_text_source(const std::vector<std::string>& inputs, TextStats& stats) {
  return [&inputs, &stats](const TextSink& sink) {
    Progress progress("read text", 0, Progress::Unit::bytes);
    auto emit = [&](std::string_view line) {
      sink(line);
      ++stats.lines;
      stats.bytes += line.size() + 1;
      progress.add(line.size() + 1);
    };
    for (const std::string& input : inputs) {
      if (is_plain_text(input)) {
        for (const std::string& path : expand_inputs({input})) {
          std::ifstream in(path, std::ios::binary);
          if (!in) throw_errno("cannot open", path);
          for (std::string line; std::getline(in, line);) {
            if (!line.empty() && line.back() == '\r') line.pop_back();
            emit(line);
          }
          if (in.bad()) throw Error(Where{path}, "read error");
        }
        continue;
      }
      DocReader reader(input);
      Document doc;
      while (reader.next(doc)) {
        ++stats.documents;
        progress.set_note(cat(stats.documents, " documents"));
        std::string_view text = doc.text;
        for (size_t start = 0; start <= text.size();) {
          size_t end = text.find('\n', start);
          if (end == std::string_view::npos) end = text.size();
          emit(text.substr(start, end - start));
          start = end + 1;
        }
      }
    }
    progress.finish();
  };
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Train a tokenizer on document shards or plain text: a WordPiece vocabulary (OUT/vocab.txt, "
               "as HF's BertWordPieceTokenizer.train) or a SentencePiece model (OUT/spm.model + spm.vocab)",
               "train-tokenizer"};
  ToolOptions common(app);
  std::string kind, out_dir;
  std::vector<std::string> inputs;
  int64_t vocab_size = 0;
  bool lowercase = true;
  WordPieceTrainerOptions wp;
  SentencePieceTrainerOptions spm;
  app.add_option("--kind", kind, "wordpiece or sentencepiece")
      ->required()
      ->check(CLI::IsMember({"wordpiece", "sentencepiece"}));
  app.add_option("--vocab-size", vocab_size, "vocabulary size")->required()->check(CLI::PositiveNumber);
  app.add_option("-o,--output", out_dir, "output directory (created if missing)")->required();
  app.add_option("inputs", inputs,
                 "document shards, shard directories, wikiextractor output, or .txt files (one sentence per line)")
      ->required();
  app.add_flag("--lowercase,!--no-lowercase", lowercase, "wordpiece: lowercase and strip accents (default: yes)");
  app.add_option("--min-frequency", wp.min_frequency, "wordpiece: pairs seen fewer times are not merged")
      ->capture_default_str();
  app.add_option("--limit-alphabet", wp.limit_alphabet, "wordpiece: keep this many most frequent characters (0: all)")
      ->capture_default_str();
  app.add_option("--model-type", spm.model_type,
                 "sentencepiece: unigram or bpe (the library trains on 16 threads whatever --threads says: "
                 "unigram's result depends on the count)")
      ->check(CLI::IsMember({"unigram", "bpe"}))
      ->capture_default_str();
  app.add_option("--character-coverage", spm.character_coverage,
                 "sentencepiece: share of characters the model covers (1.0 for small alphabets)")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  return run_tool(app, argc, argv, [&] {
    auto start = std::chrono::steady_clock::now();
    const DirLock lock(out_dir);  // one run per directory
    for (const std::string& stale : remove_stale_temp_files(out_dir, [](std::string_view name) {
           return name == "vocab.txt" || name == "spm.model" || name == "spm.vocab";
         }))
      log_info("removed ", stale, ", left by a run that was killed");
    TextStats stats;
    TextSource source = make_text_source(inputs, stats);
    std::string summary;
    if (kind == "wordpiece") {
      wp.vocab_size = vocab_size;
      WordCounts words = count_words(source, bert_word_splitter(lowercase));
      if (words.empty()) throw UsageError("no text to train on: the inputs hold no words");
      std::vector<std::string> vocab = train_wordpiece(words, wp);
      std::string path = path_join(out_dir, "vocab.txt");
      write_vocab_txt(path, vocab);
      summary = cat("wrote ", path, ": ", vocab.size(), " tokens from ", words.size(), " distinct words");
    } else {
      spm.vocab_size = vocab_size;
      SentencePieceModel model = train_sentencepiece(source, spm);
      write_file_atomic(path_join(out_dir, "spm.model"), model.model);
      write_file_atomic(path_join(out_dir, "spm.vocab"), model.vocab);
      summary = cat("wrote ", path_join(out_dir, "spm.model"), " and spm.vocab from ", model.sentences, " sentences");
    }
    double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    log_info(summary, " (", stats.documents, " documents, ", stats.lines, " lines, ", human_bytes(double(stats.bytes)),
             " of text) in ", human_duration(seconds));
    return 0;
  });
}
