// Fuzzes the document reader and the UTF-8 repair. The input is read as a file (plain, or zstd /
// bz2 when its magic says so), and again zstd-compressed whole and cut short. pretrain::Error is
// the only acceptable failure; anything else (a crash, another exception, a hang) is a bug. When
// the plain read succeeds, the documents must survive a write → read round trip unchanged, and
// every repaired string must be valid UTF-8.
#include <zstd.h>

#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/error.h"
#include "formats/doc_shards.h"
#include "common/utf8.h"
#include "fuzz_util.h"

namespace {

using namespace pretrain;

void check(bool ok) {
  if (!ok) std::abort();
}

// All documents of the file, or nothing when it is rejected with an Error.
std::optional<std::vector<Document>> read_all(const std::string& path) {
  try {
    DocReader reader(path);
    std::vector<Document> docs;
    Document d;
    while (reader.next(d)) {
      check(is_valid_utf8(d.id) && is_valid_utf8(d.url) && is_valid_utf8(d.title) && is_valid_utf8(d.text));
      docs.push_back(d);
    }
    return docs;
  } catch (const Error&) {
    return std::nullopt;
  }
}

void fuzz_utf8(const std::string& bytes) {
  std::string out;
  size_t replaced = append_repaired_utf8(bytes, out);
  check(is_valid_utf8(out));
  check((replaced == 0) == is_valid_utf8(bytes));
  check(replaced == 0 || out != bytes);
  std::string again = out;
  check(repair_utf8(again) == 0 && again == out);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const fuzz::ScratchFile plain("doc_shards", ".jsonl"), zst("doc_shards", ".jsonl.zst"),
      again("doc_shards", "-again.jsonl");
  std::string bytes(reinterpret_cast<const char*>(data), size);
  fuzz_utf8(bytes);

  plain.write(bytes);
  std::optional<std::vector<Document>> docs = read_all(plain.path());

  std::string compressed(ZSTD_compressBound(size), '\0');
  size_t n = ZSTD_compress(compressed.data(), compressed.size(), bytes.data(), size, 1);
  check(!ZSTD_isError(n));
  compressed.resize(n);
  zst.write(compressed);
  std::optional<std::vector<Document>> from_zstd = read_all(zst.path());
  // Magic bytes pick the decoder, so a plain input that reads must read the same compressed.
  if (docs && bytes.compare(0, 4, "\x28\xB5\x2F\xFD") != 0 && bytes.compare(0, 3, "BZh") != 0)
    check(from_zstd && *from_zstd == *docs);
  zst.write(std::string_view(compressed).substr(0, compressed.size() / 2));
  read_all(zst.path());

  if (docs) {
    // Whatever was read writes back as JSON lines that read to the same documents.
    std::string lines;
    for (const Document& d : *docs) append_doc_json_line(d, lines);
    again.write(lines);
    std::optional<std::vector<Document>> back = read_all(again.path());
    check(back && *back == *docs);
  }
  return 0;
}
