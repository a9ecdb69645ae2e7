// The mpirun ranks' part files: documents written and read back as they went in, nothing under the
// final names before commit, a done part kept only when its key and files agree, and a torn part
// refused with an error naming the file.
#include "datagen/wikiprep/rank_parts.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <numeric>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/file.h"
#include "test_util.h"

namespace pretrain::rank_parts_test {
namespace {

using nlohmann::json;
using testing::TempDir;

std::vector<CleanDocument> documents() {
  std::vector<CleanDocument> docs;
  for (int i = 0; i < 5; ++i) {
    CleanDocument d;
    d.doc = {std::to_string(i), "", "T" + std::to_string(i), std::string(size_t(10 * i), 'x') + "\nend"};
    d.sentences = std::string(size_t(i + 1), 's') + ".\n";
    d.sentence_count = 1;
    docs.push_back(d);
  }
  docs[0].doc.text = "";  // a redirect kept: an empty document is a document too
  return docs;
}

// A committed part of `docs`, with its summary under `key`; returns the serialized documents.
std::vector<std::string> write_part(const std::string& part, WikiprepFormat format, const std::vector<CleanDocument>& docs,
                                    const json& key) {
  RankPartSink sink(part, format);
  std::vector<std::string> serialized;
  uint64_t text_bytes = 0;
  for (const CleanDocument& d : docs) {
    sink.add(d);
    serialized.emplace_back();
    serialize_document(format, d, serialized.back());
    text_bytes += shard_bytes_of(format, serialized.back().size());
  }
  EXPECT_FALSE(file_exists(part + ".data")) << "the data is under its finished name before commit";
  sink.commit();
  EXPECT_EQ(sink.text_bytes(), text_bytes);
  EXPECT_TRUE(sink.shards().empty());  // a part commits no shard: the pipeline never checkpoints
  write_part_summary(part, {{"key", key}, {"documents", sink.sizes().size()}, {"data_bytes", sink.data_bytes()}});
  return serialized;
}

TEST(RankParts, PathsUnderWork) {
  EXPECT_EQ(rank_parts_dir("/out"), "/out/.work");
  EXPECT_EQ(rank_part_path("/out", 1, 3), "/out/.work/wikiprep-part-1-of-3");
}

TEST(RankParts, DocumentsComeBackAsTheyWentIn) {
  for (WikiprepFormat format : {WikiprepFormat::jsonl, WikiprepFormat::sentences}) {
    TempDir dir;
    const std::string part = dir.file("part");
    std::vector<std::string> serialized = write_part(part, format, documents(), json::object());
    std::vector<uint64_t> sizes = read_part_sizes(part);
    ASSERT_EQ(sizes.size(), serialized.size());
    for (size_t i = 0; i < sizes.size(); ++i) EXPECT_EQ(sizes[i], serialized[i].size());
    EXPECT_EQ(file_size(part + ".data"), std::accumulate(sizes.begin(), sizes.end(), uint64_t{0}));
    RankPartReader reader(part);
    for (size_t i = 0; i < sizes.size(); ++i) EXPECT_EQ(reader.next(sizes[i]), serialized[i]) << i;
    // From the third document on, as a rank whose first shard starts there reads it.
    RankPartReader from_third(part);
    from_third.skip(sizes[0] + sizes[1]);
    EXPECT_EQ(from_third.next(sizes[2]), serialized[2]);
  }
}

TEST(RankParts, AddSerializedIsNotForParts) {
  TempDir dir;
  RankPartSink sink(dir.file("part"), WikiprepFormat::jsonl);
  EXPECT_THROW(sink.add_serialized("{}\n", 0), std::logic_error);
}

TEST(RankParts, TornSizesAreRefusedNamingTheFile) {
  TempDir dir;
  const std::string part = dir.file("part");
  write_part(part, WikiprepFormat::jsonl, documents(), json::object());
  std::string sizes = read_file(part + ".sizes");
  write_file_atomic(part + ".sizes", sizes.substr(0, sizes.size() - 3));
  std::string what = testing::error_message([&] { read_part_sizes(part); });
  EXPECT_NE(what.find(part + ".sizes"), std::string::npos) << what;
  EXPECT_NE(what.find("whole number of 8-byte sizes"), std::string::npos) << what;
}

TEST(RankParts, ShortDataIsRefusedNamingTheFile) {
  TempDir dir;
  const std::string part = dir.file("part");
  write_part(part, WikiprepFormat::sentences, documents(), json::object());
  std::vector<uint64_t> sizes = read_part_sizes(part);
  std::string data = read_file(part + ".data");
  write_file_atomic(part + ".data", data.substr(0, data.size() - 1));
  RankPartReader reader(part);
  for (size_t i = 0; i + 1 < sizes.size(); ++i) reader.next(sizes[i]);
  std::string what = testing::error_message([&] { reader.next(sizes.back()); });
  EXPECT_NE(what.find(part + ".data"), std::string::npos) << what;
  EXPECT_NE(what.find("shorter than its sizes say"), std::string::npos) << what;
  EXPECT_NE(testing::error_message([&] { RankPartReader missing(dir.file("none")); }).find("none.data"), std::string::npos);
}

TEST(RankParts, ADonePartIsKeptOnlyWhenItsKeyAndFilesAgree) {
  TempDir dir;
  const std::string part = dir.file("part");
  const json key = {{"input", "dump.xml"}, {"part", {1, 3}}};
  json summary;
  std::vector<uint64_t> sizes;
  EXPECT_FALSE(load_done_part(part, key, summary, sizes));  // none yet
  write_part(part, WikiprepFormat::jsonl, documents(), key);
  ASSERT_TRUE(load_done_part(part, key, summary, sizes));
  EXPECT_EQ(summary["key"], key);
  EXPECT_EQ(sizes, read_part_sizes(part));
  EXPECT_FALSE(load_done_part(part, json{{"input", "dump.xml"}, {"part", {1, 4}}}, summary, sizes));  // another N

  const std::string data = read_file(part + ".data"), size_bytes = read_file(part + ".sizes");
  write_file_atomic(part + ".data", data.substr(0, data.size() - 1));  // torn data
  EXPECT_FALSE(load_done_part(part, key, summary, sizes));
  write_file_atomic(part + ".data", data);
  write_file_atomic(part + ".sizes", size_bytes.substr(0, 8));  // one size where the summary says five
  EXPECT_FALSE(load_done_part(part, key, summary, sizes));
  write_file_atomic(part + ".sizes", size_bytes.substr(0, 13));  // torn sizes: refused, with a warning
  EXPECT_FALSE(load_done_part(part, key, summary, sizes));
  write_file_atomic(part + ".sizes", size_bytes);
  ASSERT_TRUE(load_done_part(part, key, summary, sizes));
  write_file_atomic(part + ".json", "{\"key\":");  // a summary cut short
  EXPECT_FALSE(load_done_part(part, key, summary, sizes));
}

TEST(RankParts, RemoveTakesThePartsAndAnEmptyWorkDirectory) {
  TempDir dir;
  make_dirs(rank_parts_dir(dir.path()));
  for (int r = 0; r < 2; ++r) write_part(rank_part_path(dir.path(), r, 2), WikiprepFormat::jsonl, documents(), json::object());
  write_file_atomic(dir.file("docs-00000.jsonl.zst"), "x");
  remove_rank_parts(dir.path());
  EXPECT_FALSE(std::filesystem::exists(rank_parts_dir(dir.path())));
  EXPECT_TRUE(file_exists(dir.file("docs-00000.jsonl.zst")));

  make_dirs(rank_parts_dir(dir.path()));
  write_part(rank_part_path(dir.path(), 0, 1), WikiprepFormat::jsonl, documents(), json::object());
  write_file_atomic(path_join(rank_parts_dir(dir.path()), "store"), "another tool's");
  remove_rank_parts(dir.path());
  EXPECT_FALSE(file_exists(rank_part_path(dir.path(), 0, 1) + ".data"));
  EXPECT_TRUE(file_exists(path_join(rank_parts_dir(dir.path()), "store")));  // .work stays while not empty
  remove_rank_parts(dir.file("missing"));  // nothing there: nothing to do
}

}  // namespace
}  // namespace pretrain::rank_parts_test
