// Document shards: round trips through DocShardWriter and DocReader, size rotation, manifests,
// byte-identical output at any thread count, abandoned writers, wikiextractor's two formats (and
// the real wikiextractor outputs in shared data), and errors that name the file and line or offset.
#include "formats/doc_shards.h"

#include <bzlib.h>
#include <gtest/gtest.h>
#include <zstd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "common/file.h"
#include "common/hash.h"
#include "common/utf8.h"
#include "compress_util.h"
#include "test_util.h"

namespace pretrain::doc_shards_test {
namespace {

namespace fs = std::filesystem;
using pretrain::testing::TempDir;

std::string zstd_decompress(const std::string& compressed) {
  ZSTD_DCtx* dctx = ZSTD_createDCtx();
  std::string out;
  std::vector<char> buf(ZSTD_DStreamOutSize());
  ZSTD_inBuffer in{compressed.data(), compressed.size(), 0};
  size_t rc = 1;
  while (in.pos < in.size) {
    ZSTD_outBuffer o{buf.data(), buf.size(), 0};
    rc = ZSTD_decompressStream(dctx, &o, &in);
    EXPECT_FALSE(ZSTD_isError(rc));
    if (ZSTD_isError(rc)) break;
    out.append(buf.data(), o.pos);
  }
  EXPECT_EQ(rc, 0u) << "incomplete zstd frame";
  ZSTD_freeDCtx(dctx);
  return out;
}

std::string bz2_decompress_file(const std::string& path) {
  FILE* f = std::fopen(path.c_str(), "rb");
  int err = 0;
  std::string out;
  // bzReadOpen reads one stream; loop over streams with the unused bytes, as bzip2 -d does.
  std::string unused;
  for (;;) {
    BZFILE* bz = BZ2_bzReadOpen(&err, f, 0, 0, unused.data(), static_cast<int>(unused.size()));
    char buf[1 << 16];
    int n;
    do {
      n = BZ2_bzRead(&err, bz, buf, sizeof buf);
      if (n > 0) out.append(buf, static_cast<size_t>(n));
    } while (err == BZ_OK);
    EXPECT_EQ(err, BZ_STREAM_END);
    void* rest;
    int rest_n;
    BZ2_bzReadGetUnused(&err, bz, &rest, &rest_n);
    unused.assign(static_cast<char*>(rest), rest_n);
    BZ2_bzReadClose(&err, bz);
    if (unused.empty() && std::feof(f)) break;
    if (unused.empty()) {
      int c = std::fgetc(f);
      if (c == EOF) break;
      std::ungetc(c, f);
    }
  }
  std::fclose(f);
  return out;
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::vector<Document> read_all(const std::string& input, DocReaderOptions options = {}) {
  DocReader reader(input, options);
  std::vector<Document> docs;
  Document doc;
  while (reader.next(doc)) docs.push_back(doc);
  EXPECT_EQ(reader.documents_read(), docs.size());
  return docs;
}

std::string repaired(const std::string& s) {
  std::string out;
  append_repaired_utf8(s, out);
  return out;
}

Document repaired(const Document& d) { return {repaired(d.id), repaired(d.url), repaired(d.title), repaired(d.text)}; }

// `docs` written into `dir` by one DocShardWriter; the manifest it finishes with. The writer counts
// `replaced` invalid UTF-8 sequences, and the manifest says so.
Manifest write_docs(const std::string& dir, const std::vector<Document>& docs, uint64_t replaced = 0,
                    const DocShardOptions& options = {}) {
  DocShardWriter writer(dir, options);
  for (const Document& d : docs) writer.add(d);
  EXPECT_EQ(writer.invalid_utf8_replaced(), replaced);
  Manifest m = writer.finish();
  EXPECT_EQ(m.stats["invalid_utf8_replaced"], replaced);
  return m;
}

// Documents with everything that has to survive escaping.
std::vector<Document> tricky_documents() {
  std::string controls;
  for (int c = 0; c < 0x20; ++c) controls.push_back(static_cast<char>(c));
  controls += "\x7F";
  std::string huge;
  std::mt19937 rng(7);
  while (huge.size() < (5u << 20)) {
    huge += "Paragraph " + std::to_string(rng()) + " with \"quotes\", back\\slashes, 日本語, עברית, 😀.\n";
  }
  return {
      {"1", "https://en.wikipedia.org/wiki?curid=1", "Empty", ""},
      {"2", "u", "Controls", controls},
      {"3", "u", "Quotes \"and\" \\backslashes\\", "a\"b\\c\\\"d\\\\ / </script>"},
      {"4", "u", "日本語のタイトル", "これは日本語の文章です。\n第二段落。"},
      {"5", "u", "עברית", "טקסט מימין לשמאל with العربية mixed in.\n\u200Fmark"},
      {"6", "u", "Emoji 😀", "Faces 😀😃 and flags 🇬🇷 and a ZWJ family 👨‍👩‍👧, U+2028 \u2028 U+2029 \u2029."},
      {"7", "u", "Huge", huge},
      {"", "", "", "only text"},
  };
}

std::vector<Document> invalid_utf8_documents() {
  return {
      {"bad\xFF", "u\xC0\xAF", "Title \xED\xA0\x80", "text \xF0\x9F\x98 cut emoji and lone \x80 byte"},
      {"ok", "u", "ok", "\xE1\x80\xE2\xF0\x91\x92\xF1\xBF\x41"},
  };
}

TEST(DocShards, RoundTripKeepsEveryCharacter) {
  TempDir dir;
  std::vector<Document> docs = tricky_documents();
  write_docs(dir.path(), docs);
  EXPECT_EQ(read_all(dir.path()), docs);
}

TEST(DocShards, InvalidUtf8IsReplacedAndCounted) {
  TempDir dir;
  std::vector<Document> docs = invalid_utf8_documents();
  // bad\xFF (1), \xC0\xAF (2), \xED\xA0\x80 (3), \xF0\x9F\x98 (1) + \x80 (1), then 4 in the second.
  write_docs(dir.path(), docs, 12);
  std::vector<Document> back = read_all(dir.path());
  ASSERT_EQ(back.size(), docs.size());
  for (size_t i = 0; i < docs.size(); ++i) {
    EXPECT_EQ(back[i], repaired(docs[i]));
    EXPECT_TRUE(is_valid_utf8(back[i].id + back[i].url + back[i].title + back[i].text));
  }
}

// Our JSON escaping, checked against nlohmann's strict parser: non-ASCII stays raw UTF-8, only
// '"', '\\' and control characters are escaped.
TEST(DocShards, JsonLinesAreStrictJsonWithRawUtf8) {
  for (const Document& d : tricky_documents()) {
    std::string line;
    append_doc_json_line(d, line);
    ASSERT_EQ(line.back(), '\n');
    line.pop_back();
    for (char c : line) ASSERT_GE(static_cast<unsigned char>(c), 0x20u) << "raw control character";
    EXPECT_EQ(line.find("\\u00e"), std::string::npos);
    nlohmann::json j = nlohmann::json::parse(line);
    EXPECT_EQ(j.size(), 4u);
    EXPECT_EQ(j["id"], d.id);
    EXPECT_EQ(j["url"], d.url);
    EXPECT_EQ(j["title"], d.title);
    EXPECT_EQ(j["text"], d.text);
  }
  std::string line;
  append_doc_json_line({"1", "u", "日本", std::string("a\x01\x1F\x7F\n\t\"\\", 8)}, line);
  EXPECT_EQ(line, "{\"id\":\"1\",\"url\":\"u\",\"title\":\"日本\",\"text\":\"a\\u0001\\u001f\x7F\\n\\t\\\"\\\\\"}\n");
}

// A byte that needs escaping (or a non-ASCII character) at every offset of a 40-byte text: the
// 16-byte, 8-byte and byte-at-a-time scans must each stop at it.
TEST(DocShards, EscapesAtEveryOffset) {
  const std::pair<std::string, std::string> cases[] = {
      {"\"", "\\\""}, {"\\", "\\\\"}, {"\n", "\\n"}, {"\x01", "\\u0001"}, {"\x1F", "\\u001f"},
      {"\xC3\xA9", "\xC3\xA9"}, {"\xE6\x97\xA5", "\xE6\x97\xA5"}, {"\xFF", std::string(kReplacementUtf8)},
  };
  for (const auto& [special, escaped] : cases) {
    for (size_t at = 0; at <= 40; ++at) {
      std::string text(40, 'a'), line;
      text.insert(at, special);
      size_t replaced = append_doc_json_line({"1", "u", "t", text}, line);
      std::string expected = std::string(at, 'a') + escaped + std::string(40 - at, 'a');
      EXPECT_EQ(line, "{\"id\":\"1\",\"url\":\"u\",\"title\":\"t\",\"text\":\"" + expected + "\"}\n") << at;
      EXPECT_EQ(replaced, special == "\xFF" ? 1u : 0u);
    }
  }
}

// Python's json module reads our lines to the same strings (compared as hex of their UTF-8).
TEST(DocShards, PythonJsonReadsOurLines) {
  if (!file_exists("/usr/bin/python3")) GTEST_SKIP() << "no /usr/bin/python3";
  TempDir dir;
  std::string lines, expected;
  auto hex = [](const std::string& s) {
    std::string h;
    char b[3];
    for (unsigned char c : s) std::snprintf(b, sizeof b, "%02x", c), h += b;
    return h.empty() ? std::string("-") : h;
  };
  std::vector<Document> docs = tricky_documents();
  docs.erase(docs.begin() + 6);  // the several-MB one: its hex is slow to compare for no gain
  for (const Document& d : docs) {
    append_doc_json_line(d, lines);
    expected += hex(d.id) + " " + hex(d.url) + " " + hex(d.title) + " " + hex(d.text) + "\n";
  }
  write_bytes(dir.file("docs.jsonl"), lines);
  write_bytes(dir.file("expected.txt"), expected);
  write_bytes(dir.file("check.py"),
              "import json, sys\n"
              "h = lambda s: s.encode('utf-8').hex() or '-'\n"
              "got = [json.loads(l) for l in open(sys.argv[1], encoding='utf-8')]\n"
              "want = [l.split() for l in open(sys.argv[2])]\n"
              "assert len(got) == len(want), (len(got), len(want))\n"
              "for g, w in zip(got, want):\n"
              "    assert [h(g['id']), h(g['url']), h(g['title']), h(g['text'])] == w, g['title']\n");
  std::string cmd = "/usr/bin/python3 " + dir.file("check.py") + " " + dir.file("docs.jsonl") + " " +
                    dir.file("expected.txt");
  EXPECT_EQ(std::system(cmd.c_str()), 0);
}

std::vector<Document> sized_documents(size_t count, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<Document> docs;
  for (size_t i = 0; i < count; ++i) {
    std::string text;
    size_t words = 20 + rng() % 400;
    for (size_t w = 0; w < words; ++w) text += "word" + std::to_string(rng() % 5000) + (w % 40 == 39 ? "\n" : " ");
    docs.push_back({std::to_string(i), "https://example.org/?curid=" + std::to_string(i), "Title " + std::to_string(i), text});
  }
  return docs;
}

TEST(DocShards, RotatesBySizeAtDocumentBoundaries) {
  TempDir dir;
  std::vector<Document> docs = sized_documents(400, 1);
  DocShardOptions options;
  options.shard_bytes = 20000;
  // Where the shards must break: before a line that would take the shard past shard_bytes.
  std::vector<uint64_t> expected_records;
  uint64_t in_shard = 0, records = 0;
  for (const Document& d : docs) {
    std::string line;
    append_doc_json_line(d, line);
    if (records > 0 && in_shard + line.size() > options.shard_bytes) {
      expected_records.push_back(records);
      in_shard = records = 0;
    }
    in_shard += line.size();
    ++records;
  }
  expected_records.push_back(records);

  Manifest m = write_docs(dir.path(), docs, 0, options);
  ASSERT_EQ(m.shards.size(), expected_records.size());
  ASSERT_GT(m.shards.size(), 10u);
  for (size_t i = 0; i < m.shards.size(); ++i) {
    EXPECT_EQ(m.shards[i].file, DocShardWriter::shard_name("docs", i));
    EXPECT_EQ(m.shards[i].records, expected_records[i]);
    std::string jsonl = zstd_decompress(read_file(dir.file(m.shards[i].file)));
    EXPECT_LE(jsonl.size(), options.shard_bytes);
    ASSERT_FALSE(jsonl.empty());
    EXPECT_EQ(jsonl.back(), '\n');
    EXPECT_EQ(static_cast<uint64_t>(std::count(jsonl.begin(), jsonl.end(), '\n')), m.shards[i].records);
  }
  EXPECT_EQ(read_all(dir.path()), docs);
}

TEST(DocShards, DocumentLargerThanShardGetsItsOwnShard) {
  TempDir dir;
  DocShardOptions options;
  options.shard_bytes = 100;
  DocShardWriter writer(dir.path(), options);
  writer.add({"1", "u", "small", "x"});
  writer.add({"2", "u", "big", std::string(1000, 'y')});
  writer.add({"3", "u", "small", "z"});
  Manifest m = writer.finish();
  ASSERT_EQ(m.shards.size(), 3u);
  for (const ShardEntry& s : m.shards) EXPECT_EQ(s.records, 1u);
}

TEST(DocShards, ManifestListsShardsWithChecksums) {
  TempDir dir;
  std::vector<Document> docs = sized_documents(200, 2);
  DocShardOptions options;
  options.shard_bytes = 50000;
  DocShardWriter writer(dir.path(), options);
  uint64_t jsonl = 0;
  for (const Document& d : docs) {
    writer.add(d);
    std::string line;
    append_doc_json_line(d, line);
    jsonl += line.size();
  }
  Manifest base;
  base.tool = "wikiprep test";
  base.args = {"--shard-bytes", "50000"};
  base.stats["pages"] = 1234;
  writer.finish(base);

  Manifest m = Manifest::read(dir.file(kManifestName));
  EXPECT_EQ(m.format, kFormatDocs);
  EXPECT_EQ(m.tool, "wikiprep test");
  EXPECT_EQ(m.stats["pages"], 1234);
  EXPECT_EQ(m.stats["documents"], docs.size());
  EXPECT_EQ(m.stats["jsonl_bytes"], jsonl);
  EXPECT_EQ(m.stats["invalid_utf8_replaced"], 0);
  EXPECT_EQ(m.extra["docs"]["shard_bytes"], 50000);
  EXPECT_EQ(m.total_records(), docs.size());
  EXPECT_EQ(m.shards.size(), writer.shards().size());
  for (const ShardEntry& s : m.shards) {
    EXPECT_EQ(s.bytes, file_size(dir.file(s.file)));
    EXPECT_EQ(s.xxh3, hex64(xxh3_file(dir.file(s.file))));
  }
  EXPECT_TRUE(verify_manifest(m, dir.path(), count_doc_records).empty());
  // Only shards and the manifest are left: no temp files.
  for (const auto& e : fs::directory_iterator(dir.path()))
    EXPECT_EQ(e.path().filename().string().find(".tmp-"), std::string::npos);
}

std::map<std::string, std::string> shard_bytes_by_name(const std::string& dir) {
  std::map<std::string, std::string> files;
  for (const auto& e : fs::directory_iterator(dir)) files[e.path().filename().string()] = read_file(e.path().string());
  return files;
}

TEST(DocShards, ByteIdenticalAtAnyThreadCount) {
  // ~15 MB of JSON: several zstd jobs per shard, so the workers really split the work.
  std::vector<Document> docs = sized_documents(6000, 3);
  docs.push_back(tricky_documents()[6]);
  std::map<std::string, std::string> reference;
  for (int threads : {1, 2, 4}) {
    TempDir dir;
    DocShardOptions options;
    options.threads = threads;
    options.shard_bytes = 8u << 20;
    DocShardWriter writer(dir.path(), options);
    for (const Document& d : docs) writer.add(d);
    writer.finish();
    std::map<std::string, std::string> files = shard_bytes_by_name(dir.path());
    files.erase(kManifestName);
    EXPECT_GE(files.size(), 2u);
    if (threads == 1) reference = files;
    else EXPECT_TRUE(files == reference) << "shards differ between 1 and " << threads << " threads";
    if (threads == 2) {
      EXPECT_FALSE(writer.single_threaded_fallback()) << "Debian's libzstd is expected to have threads";
      EXPECT_EQ(read_all(dir.path()), docs);
    }
  }
}

TEST(DocShards, AbandonedWriterLeavesOnlyCommittedShards) {
  TempDir dir;
  std::vector<Document> docs = sized_documents(100, 4);
  std::vector<ShardEntry> committed;
  {
    DocShardOptions options;
    options.shard_bytes = 30000;
    DocShardWriter writer(dir.path(), options);
    for (const Document& d : docs) writer.add(d);
    committed = writer.shards();
    ASSERT_GE(committed.size(), 2u);
    // The open shard exists only as a temp file while the writer lives.
    bool temp_seen = false;
    for (const auto& e : fs::directory_iterator(dir.path()))
      temp_seen |= e.path().filename().string().find(".tmp-") != std::string::npos;
    EXPECT_TRUE(temp_seen);
  }
  std::set<std::string> names;
  for (const auto& e : fs::directory_iterator(dir.path())) names.insert(e.path().filename().string());
  std::set<std::string> expected;
  uint64_t first_records = 0;
  for (const ShardEntry& s : committed) {
    expected.insert(s.file);
    EXPECT_EQ(s.xxh3, hex64(xxh3_file(dir.file(s.file))));
    EXPECT_EQ(count_doc_records(dir.file(s.file)), s.records);
    first_records += s.records;
  }
  EXPECT_EQ(names, expected) << "no manifest, no temp file, no half shard";

  // Resume: keep the committed shards, write the rest from shard K on.
  DocShardOptions options;
  options.shard_bytes = 30000;
  options.first_shard_index = committed.size();
  DocShardWriter writer(dir.path(), options);
  for (size_t i = first_records; i < docs.size(); ++i) writer.add(docs[i]);
  Manifest base;
  base.shards = committed;
  Manifest m = writer.finish(base);
  EXPECT_EQ(m.total_records(), docs.size());
  EXPECT_EQ(m.stats["documents"], docs.size());
  EXPECT_EQ(m.shards[committed.size()].file, DocShardWriter::shard_name("docs", committed.size()));
  EXPECT_EQ(read_all(dir.path()), docs);
}

TEST(DocShards, ManifestChecksumsAndCountsAreVerified) {
  TempDir dir;
  std::vector<Document> docs = sized_documents(50, 5);
  write_docs(dir.path(), docs);
  Manifest m = Manifest::read(dir.file(kManifestName));
  std::string shard = read_file(dir.file(m.shards[0].file));
  std::string bad = shard;
  bad[bad.size() / 2] ^= 0x40;
  write_bytes(dir.file(m.shards[0].file), bad);
  try {
    read_all(dir.path());
    FAIL() << "expected an Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("xxh3"), std::string::npos) << e.what();
  }
  // Without the checksum pass, zstd's own content checksum still catches it.
  DocReaderOptions no_verify;
  no_verify.verify_checksums = false;
  EXPECT_THROW(read_all(dir.path(), no_verify), Error);

  write_bytes(dir.file(m.shards[0].file), shard);
  m.shards[0].records += 1;
  m.write(dir.file(kManifestName));
  try {
    read_all(dir.path());
    FAIL() << "expected an Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("documents (manifest)"), std::string::npos) << e.what();
  }
}


// Each cut of `whole` (a compressed shard) written to `path` is an error naming the file, an
// offset inside what was left, and the compression (`kind`).
void expect_truncation_named(const std::string& path, const std::string& whole, const std::vector<size_t>& lengths,
                             const char* kind) {
  for (size_t len : lengths) {
    write_bytes(path, whole.substr(0, len));
    try {
      read_all(path);
      ADD_FAILURE() << "no error at length " << len;
    } catch (const Error& e) {
      EXPECT_EQ(e.where().file, path);
      EXPECT_GE(e.where().offset, 0) << e.what();
      EXPECT_LE(e.where().offset, static_cast<int64_t>(len)) << e.what();
      EXPECT_NE(std::string(e.what()).find(kind), std::string::npos) << e.what();
    }
  }
}

TEST(DocShards, TruncatedZstdNamesTheOffset) {
  TempDir dir;
  std::vector<Document> docs = sized_documents(300, 6);
  write_docs(dir.path(), docs);
  std::string shard = read_file(dir.file("docs-00000.jsonl.zst"));
  expect_truncation_named(dir.file("cut.jsonl.zst"), shard,
                          {4, 5, 20, shard.size() / 3, shard.size() / 2, shard.size() - 5, shard.size() - 1}, "zstd");
}

TEST(DocShards, TruncatedBz2NamesTheOffset) {
  TempDir dir;
  std::string jsonl;
  for (const Document& d : sized_documents(300, 7)) append_doc_json_line(d, jsonl);
  std::string bz = testing::bz2_stream(jsonl);
  expect_truncation_named(dir.file("cut.jsonl.bz2"), bz, {10, 100, bz.size() / 2, bz.size() - 1}, "bz2");
}

TEST(DocShards, MalformedJsonNamesTheLine) {
  TempDir dir;
  const std::pair<std::string, std::string> cases[] = {
      {R"({"id":"2","text":5})", "field 'text' to be a string"},
      {R"({"id":"2","title":"t"})", "field 'text'"},
      {R"({"id":2,"text":"x"})", "field 'id' to be a string"},
      {R"({"text":"unterminated)", "missing closing quote"},
      {R"({"text":"x"} trailing)", "end of the line"},
      {R"({"text":"bad \q escape"})", "forbidden character after backslash (last read: '\"bad \\q')"},
      {"{\"text\":\"raw\ttab\"}", "control character"},
      {R"({"text":"x", "n": 01})", "',' or '}'"},
      {R"({"text":"x", "n": [1, 2,]})", "JSON value"},
      {R"({"text":"x" "id":"1"})", "',' or '}'"},
      {R"({"text":"\ud800\u12"})", "hex digits"},
      {R"(["text"])", "JSON object"},
  };
  for (const auto& [bad, expected] : cases) {
    std::string path = dir.file("bad.jsonl");
    write_bytes(path, "{\"id\":\"1\",\"text\":\"fine\"}\n\n" + bad + "\n{\"text\":\"after\"}\n");
    try {
      read_all(path);
      FAIL() << "no error for " << bad;
    } catch (const Error& e) {
      EXPECT_EQ(e.where().file, path) << bad;
      EXPECT_EQ(e.where().line, 3) << bad;
      EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << bad << " → " << e.what();
    }
  }
}

TEST(DocShards, ReadsOtherToolsJson) {
  TempDir dir;
  std::string path = dir.file("other.jsonl");
  write_bytes(path,
              "\xEF\xBB\xBF{\"id\": \"12\", \"revid\": \"99\", \"url\": \"https://x/?curid=12\", \"title\": \"A\", "
              "\"meta\": {\"n\": [1, -2.5e3, true, false, null, {}], \"s\": \"\\u00e9\"}, \"text\": \"x\"}\r\n"
              "  {\"text\":\"\\ud83d\\ude00 pair, \\ud800 lone high, \\udc00 lone low, \\u00e9\\/\\b\\f\"}  \n"
              "{\"text\":\"raw \xFF byte\", \"title\":\"dup\", \"title\":\"last wins\"}");  // no final newline
  DocReader reader(path);
  Document d;
  ASSERT_TRUE(reader.next(d));
  EXPECT_EQ(d, (Document{"12", "https://x/?curid=12", "A", "x"}));
  EXPECT_EQ(reader.current_kind(), "jsonl");
  ASSERT_TRUE(reader.next(d));
  EXPECT_EQ(d.text, "😀 pair, \xEF\xBF\xBD lone high, \xEF\xBF\xBD lone low, é/\b\f");
  EXPECT_EQ(d.id, "");
  EXPECT_EQ(reader.current_line(), 2);
  ASSERT_TRUE(reader.next(d));
  EXPECT_EQ(d.text, "raw \xEF\xBF\xBD byte");
  EXPECT_EQ(d.title, "last wins");
  EXPECT_FALSE(reader.next(d));
  EXPECT_EQ(reader.invalid_utf8_replaced(), 3u);
}

// bytes_read() moves through a file as it is read (a single big input used to show 0% until its
// end) and ends at the inputs' total size.
TEST(DocShards, BytesReadFollowsTheReadingThroughEachFile) {
  TempDir dir;
  std::string line = "{\"text\": \"" + std::string(1000, 'x') + "\"}\n", big;
  for (int i = 0; i < 3000; ++i) big += line;  // 3 MB: several reads
  write_bytes(dir.file("a.jsonl"), big);
  write_bytes(dir.file("b.jsonl"), line);
  DocReader reader(std::vector<std::string>{dir.file("a.jsonl"), dir.file("b.jsonl")});
  EXPECT_EQ(reader.bytes_read(), 0u);
  Document d;
  uint64_t docs = 0, middle = 0;
  while (reader.next(d))
    if (++docs == 1500) middle = reader.bytes_read();
  EXPECT_EQ(docs, 3001u);
  EXPECT_GT(middle, 0u);
  EXPECT_LT(middle, big.size());
  EXPECT_EQ(reader.bytes_read(), big.size() + line.size());
}

// wikiextractor's default output: <doc> blocks with the title repeated at the top of the text.
std::string as_doc_blocks(const std::vector<Document>& docs) {
  std::string out;
  for (const Document& d : docs)
    out += "<doc id=\"" + d.id + "\" url=\"" + d.url + "\" title=\"" + d.title + "\">\n" + d.title + "\n\n" + d.text +
           "\n</doc>\n";
  return out;
}

TEST(DocShards, ReadsWikiextractorDocBlocksAndDirectories) {
  TempDir dir;
  std::vector<Document> docs = {
      {"10", "https://en.wikipedia.org/wiki?curid=10", "AccessibleComputing", ""},
      {"12", "https://en.wikipedia.org/wiki?curid=12", "Anarchism", "Anarchism is a philosophy.\n\nSecond paragraph."},
      {"25", "https://en.wikipedia.org/wiki?curid=25", "Q&amp;A &quot;quoted&quot;", "日本語\nעברית"},
  };
  std::vector<Document> more = sized_documents(30, 8);
  make_dirs(dir.file("out/AA"));
  make_dirs(dir.file("out/AB"));
  write_bytes(dir.file("out/AA/wiki_00"), as_doc_blocks(docs));
  // --compress writes bz2; a file made of two bz2 streams must read whole.
  std::string second = as_doc_blocks(more);
  size_t cut = second.find("<doc", second.size() / 2);
  write_bytes(dir.file("out/AA/wiki_01.bz2"),
              testing::bz2_stream(second.substr(0, cut)) + testing::bz2_stream(second.substr(cut)));
  std::string jsonl;
  for (const Document& d : docs) append_doc_json_line(d, jsonl);
  write_bytes(dir.file("out/AB/wiki_00"), jsonl);

  EXPECT_EQ(read_all(dir.file("out/AA/wiki_00")), docs);
  EXPECT_EQ(read_all(dir.file("out/AA/wiki_01.bz2")), more);
  std::vector<Document> all = docs;
  all.insert(all.end(), more.begin(), more.end());
  all.insert(all.end(), docs.begin(), docs.end());
  EXPECT_EQ(read_all(dir.file("out")), all);
  EXPECT_EQ(read_all(dir.file("out/A*/wiki_00")).size(), 6u);  // a glob

  write_bytes(dir.file("open.txt"), "<doc id=\"1\" url=\"u\" title=\"t\">\nt\n\ntext\n");
  try {
    read_all(dir.file("open.txt"));
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.where().line, 1);
    EXPECT_NE(std::string(e.what()).find("</doc>"), std::string::npos);
  }
  write_bytes(dir.file("neither.txt"), "plain text\n");
  EXPECT_THROW(read_all(dir.file("neither.txt")), Error);
}

TEST(DocShards, InspectShowsCountsAndFirstTitles) {
  TempDir dir;
  write_docs(dir.path(), tricky_documents());
  std::ostringstream out;
  inspect_docs(dir.path(), out, 2);
  std::string s = out.str();
  EXPECT_NE(s.find("documents: 8"), std::string::npos) << s;
  EXPECT_NE(s.find("jsonl.zst"), std::string::npos) << s;
  EXPECT_NE(s.find("Controls"), std::string::npos) << s;
  EXPECT_EQ(s.find("Quotes"), std::string::npos) << s;
  EXPECT_EQ(count_doc_records(dir.path()), 8u);
}

// The real wikiextractor 3.0.7 outputs: every line is a document, and the first one reads the same
// as a plain JSON parse of the first line. Then a round trip through our shards.
TEST(DocShards, ReadsRealWikiextractorOutputs) {
  PRETRAIN_REQUIRE_SHARED(main_jsonl, "wikipedia/enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.wikiextractor.jsonl");
  std::string wiki_dir = dir_name(main_jsonl);
  int files = 0;
  for (const auto& e : fs::directory_iterator(wiki_dir)) {
    std::string path = e.path().string();
    if (path.find(".wikiextractor.jsonl") == std::string::npos) continue;
    ++files;
    std::string text = path.ends_with(".bz2") ? bz2_decompress_file(path) : read_file(path);
    std::vector<Document> docs = read_all(path);
    EXPECT_EQ(docs.size(), static_cast<size_t>(std::count(text.begin(), text.end(), '\n'))) << path;
    ASSERT_FALSE(docs.empty()) << path;
    nlohmann::json first = nlohmann::json::parse(text.substr(0, text.find('\n')));
    EXPECT_EQ(docs[0].id, first["id"].get<std::string>()) << path;
    EXPECT_EQ(docs[0].url, first["url"].get<std::string>()) << path;
    EXPECT_EQ(docs[0].title, first["title"].get<std::string>()) << path;
    EXPECT_EQ(docs[0].text, first["text"].get<std::string>()) << path;
  }
  EXPECT_GE(files, 6);

  std::vector<Document> docs = read_all(main_jsonl);
  EXPECT_EQ(docs.size(), 205u);  // wikiextractor's README count for the main sample, redirects included
  EXPECT_EQ(docs[0].url, "https://en.wikipedia.org/wiki?curid=10");
  TempDir dir;
  DocShardOptions options;
  options.shard_bytes = 1 << 20;
  DocShardWriter writer(dir.path(), options);
  auto start = std::chrono::steady_clock::now();
  for (const Document& d : docs) writer.add(d);
  writer.finish();
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("wrote %s of JSON lines in %.3f s\n", std::to_string(writer.jsonl_bytes()).c_str(), seconds);
  EXPECT_GE(writer.shards().size(), 2u);
  EXPECT_EQ(read_all(dir.path()), docs);
}

}  // namespace
}  // namespace pretrain::doc_shards_test

namespace pretrain::doc_shards_test {
namespace {

// mpirun wikiprep's ranks serialize documents and others add the lines: the shards (cut by the
// same rule, written in pieces, resumed at a later index) are the bytes add() writes.
TEST(DocShards, SerializedLinesGiveTheSameShards) {
  TempDir a, b;
  std::vector<Document> docs = tricky_documents();
  for (const Document& d : invalid_utf8_documents()) docs.push_back(d);
  for (int i = 0; i < 300; ++i) docs.push_back({std::to_string(i), "u", "t", std::string(size_t(50 + i * 37 % 900), 'x')});
  DocShardOptions options;
  options.shard_bytes = 20000;
  Manifest whole, pieces;
  {
    DocShardWriter writer(a.path(), options);
    for (const Document& d : docs) writer.add(d);
    whole = writer.finish();
  }
  {
    // Two writers, as two ranks: the second starts where the first's shards end.
    std::vector<std::string> lines;
    uint64_t replaced = 0;
    for (const Document& d : docs) {
      std::string line;
      replaced += append_doc_json_line(d, line);
      lines.push_back(line);
    }
    size_t opened = 0;  // the line that opens shard 3: the second writer's first
    {
      DocShardWriter first(b.path(), options);
      while (first.shards().size() < 3) first.add_serialized(lines[opened++]);
      --opened;
    }  // shard 3, unfinished, is dropped with the first writer
    options.first_shard_index = 3;
    DocShardWriter second(b.path(), options);
    for (size_t j = opened; j < lines.size(); ++j) second.add_serialized(lines[j], j == opened ? replaced : 0);
    pieces = second.finish();
    EXPECT_EQ(second.invalid_utf8_replaced(), replaced);
  }
  ASSERT_GT(whole.shards.size(), 5u);
  for (const ShardEntry& e : whole.shards)
    EXPECT_EQ(read_file(a.file(e.file)), read_file(b.file(e.file))) << e.file;
  EXPECT_THROW(DocShardWriter(b.path(), options).add_serialized("{\"text\":\"two\"}\n{\"text\":\"lines\"}\n"), Error);
  EXPECT_THROW(DocShardWriter(b.path(), options).add_serialized("{\"text\":\"no newline\"}"), Error);
}

}  // namespace
}  // namespace pretrain::doc_shards_test
