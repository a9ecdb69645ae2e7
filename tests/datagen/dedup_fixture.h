// Documents for dedup's tests: texts with planted exact and near duplicates, written as document
// shards (a directory with manifest.json) or plain JSON lines.
#pragma once
#include <random>
#include <string>
#include <vector>

#include "common/file.h"
#include "formats/doc_json.h"
#include "formats/doc_shards.h"

namespace pretrain::dedup_fixture {

// A word of letters for n (digits would all read as "0" in the shingle text).
inline std::string letters(uint64_t n) {
  std::string w = "w";
  do {
    w.push_back(static_cast<char>('a' + n % 26));
    n /= 26;
  } while (n > 0);
  return w;
}

// A text of `words` words drawn from a vocabulary of 5000, from seed.
inline std::string random_text(uint64_t seed, int words) {
  std::mt19937_64 rng(seed);
  std::string text;
  for (int i = 0; i < words; ++i) {
    if (i) text += (i % 17 == 0) ? "\n" : " ";
    text += letters(rng() % 5000);
  }
  return text;
}

// text with every `every`-th word replaced (a near duplicate: ~1/every of the words differ).
inline std::string edited(const std::string& text, int every) {
  std::string out;
  size_t start = 0;
  for (int i = 0; start <= text.size(); ++i) {
    size_t end = text.find_first_of(" \n", start);
    if (end == std::string::npos) end = text.size();
    out += (i % every == every - 1) ? "edit" + letters(static_cast<uint64_t>(i)) : text.substr(start, end - start);
    if (end < text.size()) out += text[end];
    start = end + 1;
  }
  return out;
}

inline Document doc(std::string id, std::string text) {
  Document d;
  d.id = std::move(id);
  d.url = "https://example.org/?curid=" + d.id;
  d.title = "Title " + d.id;
  d.text = std::move(text);
  return d;
}

// Writes docs as shards of at most `shard_bytes` into dir (with manifest.json).
inline void write_shards(const std::string& dir, const std::vector<Document>& docs, uint64_t shard_bytes = 1 << 20) {
  DocShardOptions o;
  o.shard_bytes = shard_bytes;
  DocShardWriter w(dir, o);
  for (const Document& d : docs) w.add(d);
  w.finish();
}

inline void write_jsonl(const std::string& path, const std::vector<Document>& docs) {
  std::string out;
  for (const Document& d : docs) append_doc_json_line(d, out);
  write_file_atomic(path, out);
}

inline std::vector<Document> read_docs(const std::string& input) {
  DocReader r(input);
  std::vector<Document> docs;
  Document d;
  while (r.next(d)) docs.push_back(d);
  return docs;
}

}  // namespace pretrain::dedup_fixture
