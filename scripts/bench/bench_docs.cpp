// Document shard throughput: write --mb of JSON lines through DocShardWriter (escaping, UTF-8
// checks, zstd at --level with --threads workers, fsync and rename of every shard), then read them
// all back through DocReader. Documents come from --input (e.g. a wikiextractor .jsonl, cycled
// until --mb is reached) or, without it, from synthetic mixed-script text.
// Prints RESULT lines for scripts/bench (MB/s of uncompressed JSON lines):
//   RESULT docs_write <MB/s> <seconds>
//   RESULT docs_read <MB/s> <seconds>
//   RESULT docs_escape <MB/s> <seconds>    (JSON escaping alone, one core, no compression)
#include <chrono>
#include <ctime>
#include <cstdio>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "common/common.h"
#include "formats/doc_shards.h"

using namespace pretrain;

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// CPU seconds of the whole process (all threads): on a busy machine wall time says little.
double cpu_seconds() { return static_cast<double>(std::clock()) / CLOCKS_PER_SEC; }

std::vector<Document> synthetic_documents(size_t count) {
  static const char* words[] = {"the", "of", "and", "anarchism", "political", "philosophy", "movement",
                                "société", "Ελληνικά", "日本語の", "文章", "עברית", "1936", "\"quoted\"",
                                "path\\name", "encyclopedia", "century", "government", "😀"};
  std::mt19937 rng(1);
  std::vector<Document> docs;
  for (size_t i = 0; i < count; ++i) {
    std::string text;
    size_t n = 200 + rng() % 3000;
    for (size_t w = 0; w < n; ++w) {
      text += words[rng() % std::size(words)];
      text += w % 60 == 59 ? "\n" : " ";
    }
    docs.push_back({std::to_string(i), "https://en.wikipedia.org/wiki?curid=" + std::to_string(i),
                    "Title " + std::to_string(i), std::move(text)});
  }
  return docs;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Document shard write/read benchmark", "bench_docs"};
  double mb = 256;
  int level = DocShardOptions{}.zstd_level, threads = 1;
  std::string dir = "/tmp", input;
  app.add_option("--mb", mb, "MB of JSON lines to write");
  app.add_option("--level", level, "zstd level");
  app.add_option("--threads", threads, "zstd workers");
  app.add_option("--input", input, "documents to cycle through (any DocReader input)");
  app.add_option("--dir", dir, "where to write the shards (removed afterwards)");
  return run_tool(app, argc, argv, [&] {
    std::vector<Document> pool;
    if (!input.empty()) {
      DocReader reader(input);
      Document d;
      while (reader.next(d)) pool.push_back(d);
      if (pool.empty()) throw Error(Where{input}, "expected documents, found none");
    } else {
      pool = synthetic_documents(2000);
    }
    const uint64_t target = static_cast<uint64_t>(mb * 1e6);
    const std::string out = path_join(dir, cat("bench-docs-", ::getpid()));

    // Escaping alone: the part that runs on the caller's thread.
    auto t0 = std::chrono::steady_clock::now();
    std::string line;
    uint64_t escaped = 0;
    for (size_t i = 0; escaped < target; ++i) {
      line.clear();
      append_doc_json_line(pool[i % pool.size()], line);
      escaped += line.size();
    }
    double escape_s = seconds_since(t0);
    std::printf("RESULT docs_escape %.1f %.3f\n", escaped / 1e6 / escape_s, escape_s);

    t0 = std::chrono::steady_clock::now();
    double cpu0 = cpu_seconds();
    DocShardOptions options;
    options.zstd_level = level;
    options.threads = threads;
    DocShardWriter writer(out, options);
    for (size_t i = 0; writer.jsonl_bytes() < target; ++i) writer.add(pool[i % pool.size()]);
    Manifest m = writer.finish();
    double write_s = seconds_since(t0);
    uint64_t jsonl = writer.jsonl_bytes(), compressed = 0;
    for (const ShardEntry& s : m.shards) compressed += s.bytes;
    std::printf("RESULT docs_write %.1f %.3f\n", jsonl / 1e6 / write_s, write_s);
    std::fprintf(stderr, "  %llu documents, %.1f MB JSON -> %.1f MB zstd (ratio %.2f), %zu shards, %.2f cpu-s\n",
                 static_cast<unsigned long long>(writer.documents()), jsonl / 1e6, compressed / 1e6,
                 double(jsonl) / double(compressed), m.shards.size(), cpu_seconds() - cpu0);

    t0 = std::chrono::steady_clock::now();
    cpu0 = cpu_seconds();
    DocReader reader(out);
    Document d;
    uint64_t text = 0;
    while (reader.next(d)) text += d.text.size();
    double read_s = seconds_since(t0);
    std::printf("RESULT docs_read %.1f %.3f\n", jsonl / 1e6 / read_s, read_s);
    std::fprintf(stderr, "  read %llu documents, %.1f MB of text (xxh3 of every shard checked first), %.2f cpu-s\n",
                 static_cast<unsigned long long>(reader.documents_read()), text / 1e6, cpu_seconds() - cpu0);
    std::filesystem::remove_all(out);
    return 0;
  });
}
