// WordPiece training, step by step as HF's BpeTrainer::do_train (which WordPieceTrainer runs with
// continuing_subword_prefix "##"), so the vocabulary is HF's. Where HF's result depends on the
// iteration order of Rust's randomly seeded HashMaps, two runs of HF on the same text differ, and we
// fix the order instead:
//   - the "##x" forms get their ids by code point (HF: in the order words come out of its
//     HashMap), which also decides ties between equally frequent pairs (HF and we take the pair
//     with the smaller ids first);
//   - when limit_alphabet drops characters, equally frequent ones are dropped from the highest
//     code point down (HF: an unstable sort of HashMap order).
// Everything else (counts, the merge queue and its stale-entry handling, the vocabulary order) is
// HF's.
#include "tokenizer/train_wordpiece.h"

#include <algorithm>
#include <map>
#include <memory>
#include <set>
#include <unordered_map>

#include <tbb/combinable.h>
#include <tbb/parallel_for.h>

#include "common/error.h"
#include "common/file.h"
#include "common/progress.h"
#include "common/utf8.h"
#include "tokenizer/bert_pre_tokenizer.h"

namespace pretrain {

WordSplitter bert_word_splitter(bool lowercase) {
  BertNormalizerOptions options;
  options.lowercase = lowercase;
  options.strip_accents = lowercase;  // HF's BertNormalizer: strip_accents unset follows lowercase
  auto pre_tokenizer = std::make_shared<BertPreTokenizer>(options);
  return [pre_tokenizer](std::string_view text, std::vector<std::string>& words) {
    thread_local BertWords scratch;
    thread_local std::string repaired;
    if (!is_valid_utf8(text)) {
      repaired.clear();
      append_repaired_utf8(text, repaired);
      text = repaired;
    }
    scratch.clear();
    pre_tokenizer->run(text, scratch);
    for (size_t i = 0; i < scratch.size(); ++i) words.emplace_back(scratch[i]);
  };
}

WordCounts count_words(const TextSource& source, const WordSplitter& split) {
  using Counts = std::unordered_map<std::string, uint64_t>;
  Counts total;
  std::vector<std::string> batch;
  size_t batch_bytes = 0;
  // Texts are split and counted a batch at a time on the workers; each worker keeps its own counts
  // and the batch's are added to the total. Sums do not depend on who counted what.
  auto count_batch = [&] {
    tbb::combinable<Counts> local;
    tbb::parallel_for(tbb::blocked_range<size_t>(0, batch.size(), 4), [&](const tbb::blocked_range<size_t>& r) {
      Counts& counts = local.local();
      std::vector<std::string> words;
      for (size_t i = r.begin(); i != r.end(); ++i) {
        words.clear();
        split(batch[i], words);
        for (auto& w : words) ++counts[std::move(w)];
      }
    });
    local.combine_each([&](const Counts& counts) {
      for (const auto& [word, n] : counts) total[word] += n;
    });
    batch.clear();
    batch_bytes = 0;
  };
  source([&](std::string_view text) {
    batch.emplace_back(text);
    batch_bytes += text.size();
    if (batch_bytes >= (size_t{32} << 20) || batch.size() >= 65536) count_batch();
  });
  if (!batch.empty()) count_batch();
  WordCounts sorted(std::make_move_iterator(total.begin()), std::make_move_iterator(total.end()));
  std::sort(sorted.begin(), sorted.end());
  return sorted;
}

namespace {

using Pair = uint64_t;  // (left id << 32) | right id: ordered as HF's (u32, u32) tuples
Pair make_pair(uint32_t a, uint32_t b) { return (uint64_t{a} << 32) | b; }
uint32_t left(Pair p) { return static_cast<uint32_t>(p >> 32); }
uint32_t right(Pair p) { return static_cast<uint32_t>(p); }

std::u32string code_points(std::string_view s) {
  std::u32string out;
  const auto* p = reinterpret_cast<const uint8_t*>(s.data());
  const auto* end = p + s.size();
  while (p < end) {
    Utf8Step step = decode_utf8(p, end);
    out += step.valid ? step.code_point : kReplacementChar;
    p += step.length;
  }
  return out;
}

std::string utf8(char32_t cp) {
  std::string s;
  append_utf8(cp, s);
  return s;
}

struct Change {
  Pair pair;
  int delta;
};

// HF's Word::merge: every non-overlapping (a, b) left to right becomes `merged`; reports the pairs
// that disappear (-1) and appear (+1) beside each merge. The pair (a, b) itself is not reported, so
// its count stays as it was (HF's bookkeeping, kept as is).
void merge_word(std::vector<uint32_t>& symbols, uint32_t a, uint32_t b, uint32_t merged, std::vector<Change>& changes) {
  for (size_t i = 0; i < symbols.size(); ++i) {
    if (symbols[i] != a || i + 1 >= symbols.size() || symbols[i + 1] != b) continue;
    if (i > 0) {
      changes.push_back({make_pair(symbols[i - 1], a), -1});
      changes.push_back({make_pair(symbols[i - 1], merged), 1});
    }
    symbols[i] = merged;
    symbols.erase(symbols.begin() + static_cast<std::ptrdiff_t>(i) + 1);
    if (i + 1 < symbols.size()) {
      changes.push_back({make_pair(b, symbols[i + 1]), -1});
      changes.push_back({make_pair(merged, symbols[i + 1]), 1});
    }
  }
}

// An entry of HF's merge queue: the pair's count when queued and the words to merge it in. A pair
// can be queued more than once (each step queues the words where it newly appeared).
struct Merge {
  uint64_t count;
  Pair pair;
  uint64_t seq;  // queue order, only to make equal entries pop in a fixed order
  std::vector<uint32_t> words;
};
// Max-heap order: higher count first, then the smaller pair (HF), then the earlier entry.
bool pops_later(const Merge& x, const Merge& y) {
  if (x.count != y.count) return x.count < y.count;
  if (x.pair != y.pair) return x.pair > y.pair;
  return x.seq > y.seq;
}

}  // namespace

std::vector<std::string> train_wordpiece(const WordCounts& word_counts, const WordPieceTrainerOptions& options) {
  std::vector<std::string> id_to_word;
  std::unordered_map<std::string, uint32_t> word_to_id;
  auto add_token = [&](const std::string& token) {
    if (word_to_id.emplace(token, static_cast<uint32_t>(id_to_word.size())).second) id_to_word.push_back(token);
  };

  // 1. Special tokens first, in the order given.
  for (const auto& token : options.special_tokens) add_token(token);

  // 2. The alphabet: every character with its count in the text; when there are more than
  //    limit_alphabet, the rarest are dropped. The rest get ids by code point.
  std::vector<std::u32string> chars(word_counts.size());
  std::map<char32_t, uint64_t> alphabet;
  for (size_t i = 0; i < word_counts.size(); ++i) {
    chars[i] = code_points(word_counts[i].first);
    for (char32_t c : chars[i]) alphabet[c] += word_counts[i].second;
  }
  std::vector<std::pair<char32_t, uint64_t>> kept(alphabet.begin(), alphabet.end());
  if (!options.alphabet.empty()) {
    std::set<char32_t> wanted;
    for (const auto& c : options.alphabet)
      if (auto cps = code_points(c); cps.size() == 1) wanted.insert(cps[0]);
    std::erase_if(kept, [&](const auto& entry) { return !wanted.count(entry.first); });
  } else if (options.limit_alphabet > 0 && kept.size() > options.limit_alphabet) {
    std::sort(kept.begin(), kept.end(), [](const auto& x, const auto& y) {
      return x.second != y.second ? x.second < y.second : x.first > y.first;
    });
    kept.erase(kept.begin(), kept.begin() + static_cast<std::ptrdiff_t>(kept.size() - options.limit_alphabet));
    std::sort(kept.begin(), kept.end());
  }
  for (const auto& [c, count] : kept) add_token(utf8(c));

  // 3. Words as symbols: a word's first character as itself, the others in their "##" form.
  //    Characters outside the alphabet are left out. The "##" forms get ids by code point.
  std::set<char32_t> continuing;
  for (const auto& w : chars)
    for (size_t k = 1; k < w.size(); ++k)
      if (word_to_id.count(utf8(w[k]))) continuing.insert(w[k]);
  for (const auto& token : options.continuing_order) {
    std::string_view c = std::string_view(token).substr(options.continuing_subword_prefix.size());
    if (token.starts_with(options.continuing_subword_prefix) && code_points(c).size() == 1 &&
        continuing.count(code_points(c)[0]))
      add_token(token);
  }
  for (char32_t c : continuing) add_token(options.continuing_subword_prefix + utf8(c));
  std::vector<std::vector<uint32_t>> words(word_counts.size());
  for (size_t i = 0; i < chars.size(); ++i) {
    for (size_t k = 0; k < chars[i].size(); ++k) {
      std::string c = utf8(chars[i][k]);
      if (!word_to_id.count(c)) continue;
      words[i].push_back(word_to_id.at(k == 0 ? c : options.continuing_subword_prefix + c));
    }
  }
  chars.clear();
  chars.shrink_to_fit();

  // 4. Count adjacent pairs, remembering the words each occurs in.
  std::unordered_map<Pair, int64_t> pair_counts;
  std::unordered_map<Pair, std::vector<uint32_t>> where;  // words (ascending) where a pair appeared
  auto note_word = [&](Pair pair, uint32_t word) {
    auto& list = where[pair];
    if (list.empty() || list.back() != word) list.push_back(word);
  };
  for (uint32_t i = 0; i < words.size(); ++i)
    for (size_t k = 0; k + 1 < words[i].size(); ++k) {
      Pair pair = make_pair(words[i][k], words[i][k + 1]);
      pair_counts[pair] += static_cast<int64_t>(word_counts[i].second);
      note_word(pair, i);
    }

  std::vector<Merge> queue;
  uint64_t seq = 0;
  auto push = [&](Merge m) {
    m.seq = seq++;
    queue.push_back(std::move(m));
    std::push_heap(queue.begin(), queue.end(), pops_later);
  };
  // Queues the pairs of `where` whose count is positive, in pair order, and empties it.
  auto queue_where = [&] {
    std::vector<Pair> pairs;
    for (const auto& [pair, list] : where) pairs.push_back(pair);
    std::sort(pairs.begin(), pairs.end());
    for (Pair pair : pairs) {
      int64_t count = pair_counts[pair];
      if (count > 0) push({static_cast<uint64_t>(count), pair, 0, std::move(where[pair])});
    }
    where.clear();
  };
  queue_where();

  // 5. Merge the most frequent pair until the vocabulary is full.
  Progress progress("merges", static_cast<uint64_t>(std::max<int64_t>(options.vocab_size, 0)));
  std::vector<Change> changes;
  while (static_cast<int64_t>(word_to_id.size()) < options.vocab_size && !queue.empty()) {
    std::pop_heap(queue.begin(), queue.end(), pops_later);
    Merge top = std::move(queue.back());
    queue.pop_back();
    // A stale entry (the pair's count changed since it was queued) goes back with today's count.
    auto current = static_cast<uint64_t>(pair_counts[top.pair]);
    if (top.count != current) {
      top.count = current;
      push(std::move(top));
      continue;
    }
    if (top.count < 1 || options.min_frequency > top.count) break;

    std::string part_b = id_to_word[right(top.pair)];
    if (part_b.starts_with(options.continuing_subword_prefix)) part_b.erase(0, options.continuing_subword_prefix.size());
    std::string token = id_to_word[left(top.pair)] + part_b;
    add_token(token);
    uint32_t merged = word_to_id.at(token);

    for (uint32_t w : top.words) {
      changes.clear();
      merge_word(words[w], left(top.pair), right(top.pair), merged, changes);
      for (const Change& c : changes) {
        pair_counts[c.pair] += c.delta * static_cast<int64_t>(word_counts[w].second);
        if (c.delta > 0) note_word(c.pair, w);
      }
    }
    queue_where();
    progress.set(word_to_id.size());
  }
  progress.finish();
  return id_to_word;
}

void write_vocab_txt(const std::string& path, const std::vector<std::string>& vocab) {
  AtomicFile out(path);
  for (const auto& token : vocab) {
    out.write(token);
    out.write("\n", 1);
  }
  out.commit();
}

}  // namespace pretrain
