// wikitext_clean: the wikitext cleaner on JSON lines, for quality work before wikiprep exists.
// stdin: {"id","title","ns","text"[,"url"]} per line, raw wikitext (scripts/bench/extract_wikitext.py
// writes them). stdout: {"id","url","title","text"} per line, the text cleaned. stderr: documents,
// bytes and the cleaner's own throughput in CPU time (JSON parsing and writing not counted).
//   wikitext_clean [--no-lists] [--no-headings] [--heading-period] [--url-prefix P]
//                  [--file-namespace NAME]... [--category-namespace NAME]... < in > out
#include <time.h>

#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>

#include "common/error.h"
#include "datagen/wikiprep/wikitext.h"
#include "formats/doc_shards.h"

namespace {

// CPU time of this thread: the machine may be shared, wall time would count the others' work.
double thread_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

std::string field_string(const nlohmann::json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return {};
  return it->is_string() ? it->get<std::string>() : it->dump();
}

int run(int argc, char** argv) {
  using namespace pretrain;
  WikitextOptions options;
  std::string url_prefix;
  for (int a = 1; a < argc; ++a) {
    std::string arg = argv[a];
    auto value = [&]() -> std::string {
      if (a + 1 >= argc) throw UsageError(cat(arg, " needs a value"));
      return argv[++a];
    };
    if (arg == "--no-lists") options.keep_lists = false;
    else if (arg == "--no-headings") options.keep_headings = false;
    else if (arg == "--heading-period") options.heading_period = true;
    else if (arg == "--url-prefix") url_prefix = value();
    else if (arg == "--file-namespace") options.file_namespaces.push_back(value());
    else if (arg == "--category-namespace") options.category_namespaces.push_back(value());
    else throw UsageError(cat("unknown argument ", arg));
  }
  WikitextCleaner cleaner(options);
  std::ios::sync_with_stdio(false);
  std::string line, out_line;
  Document doc;
  uint64_t docs = 0, bytes_in = 0, line_no = 0;
  double seconds = 0;
  while (std::getline(std::cin, line)) {
    ++line_no;
    if (line.empty()) continue;
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(line);
    } catch (const nlohmann::json::exception& e) {
      throw Error(Where::at_line("<stdin>", static_cast<int64_t>(line_no)), cat("bad JSON: ", e.what()));
    }
    std::string text = field_string(j, "text");
    doc.id = field_string(j, "id");
    doc.title = field_string(j, "title");
    doc.url = field_string(j, "url");
    if (doc.url.empty() && !url_prefix.empty()) doc.url = url_prefix + doc.id;
    double t0 = thread_seconds();
    cleaner.clean(text, doc.text);
    seconds += thread_seconds() - t0;
    bytes_in += text.size();
    ++docs;
    out_line.clear();
    append_doc_json_line(doc, out_line);
    std::cout << out_line;
  }
  std::cout.flush();
  std::fprintf(stderr, "wikitext_clean: %llu documents, %.2f MB wikitext, clean %.3f s = %.1f MB/s\n",
               static_cast<unsigned long long>(docs), bytes_in / 1e6, seconds,
               seconds > 0 ? bytes_in / 1e6 / seconds : 0.0);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const pretrain::UsageError& e) {
    std::fprintf(stderr, "usage error: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
