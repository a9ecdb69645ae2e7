// The guards of formats/hdf5_guards.cpp: checks a file must pass before libhdf5 1.10 sees it,
// each against the crash it prevents (found by fuzzing; the reproducers are in the fuzz corpus),
// through the reader on both read paths and called directly: the HDF5 signature, the root group's
// symbol table, a chunked layout's dimensions, the chunk index B-tree's nodes and key order, and
// header messages in a shared-message heap the file lacks. Each refusal names the file and the
// byte offset of what is damaged; an undamaged file passes.
#include "formats/hdf5_guards.h"

#include <gtest/gtest.h>
#include <hdf5.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "bert_hdf5_fixture.h"
#include "common/error.h"
#include "common/file.h"
#include "formats/bert_hdf5.h"
#include "formats/hdf5_chunks.h"
#include "test_util.h"

namespace pretrain::hdf5_guards_test {
namespace {

using bert_hdf5_fixture::damaged_copy;
using bert_hdf5_fixture::expect_error;
using bert_hdf5_fixture::expect_read_error;
using bert_hdf5_fixture::expect_reads_back;
using bert_hdf5_fixture::files_with_chunk_rows;
using bert_hdf5_fixture::files_with_layout;
using bert_hdf5_fixture::foreign_layout;
using bert_hdf5_fixture::le64;
using bert_hdf5_fixture::raw_layout;
using bert_hdf5_fixture::write_foreign;
using bert_hdf5_fixture::write_random;
using testing::TempDir;

// The Error that f() throws (an empty one, and a test failure, when it throws none).
template <typename F>
Error error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e;
  }
  ADD_FAILURE() << "no error";
  return Error("");
}

// `path` opened with H5Fopen and mapped, as the reader hands them to the guards.
struct OpenFile {
  explicit OpenFile(const std::string& p) : path(p), map(p), id((hdf5::quiet_hdf5(), H5Fopen(p.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT))) {}
  ~OpenFile() {
    if (id >= 0) H5Fclose(id);
  }
  std::string path;
  MappedFile map;
  hid_t id;
};

// A chunk dimension of 0 in a layout message made libhdf5 1.10 die of SIGFPE inside H5Dopen2
// (found by fuzzing). The reader must refuse such a file with an Error before HDF5 divides by it.
TEST(BertHdf5, ZeroChunkDimensionIsAnErrorNotACrash) {
  TempDir dir;
  for (const std::string& path : files_with_chunk_rows(dir, 0))
    expect_error([&] { BertShardReader reader(path); }, {path, "chunk dimension of 0"});
}

// libhdf5 takes a chunk dimension for each axis of the dataspace and 0 for one the layout message
// does not list, then divides by it: SIGFPE inside H5Dopen2 (found by fuzzing on a lent 16-core
// machine, a layout of 0 dimensions for next_sentence_labels, rank 1; the reproducer is in the
// fuzz corpus, which CI replays under ASan). Every dataset, with 0 dimensions and with its rank.
TEST(BertHdf5, LayoutWithFewerDimensionsThanItsDataspaceIsAnErrorNotACrash) {
  const std::string found = testing::source_dir() + "/tests/fuzz/corpus/bert_hdf5/layout-of-0-dimensions-for-rank-1.hdf5";
  // The file found is damaged elsewhere too: input_ids' chunk index root is zeros, which the reader
  // refuses first since the chunk index guard (DamagedChunkIndexIsAnErrorNotACrash). The files
  // below damage the layout alone.
  for (auto read_path : {BertReadPath::automatic, BertReadPath::hyperslab})
    expect_error([&] { BertShardReader reader(found, read_path); },
                 {found, "dataset 'input_ids' has a chunk index (v1 B-tree) node at address 2936, its root, that is not a chunk"});
  TempDir dir;
  for (int dims : {0, 1}) {
    // rank + 1 → dims, or → rank for the rank-2 datasets when dims is 1.
    auto files = files_with_layout(dir, [&](std::string& bytes, size_t at) {
      bytes[at + 10] = static_cast<char>(dims == 0 ? 0 : bytes[at + 10] - 1);
    });
    for (const std::string& path : files)
      expect_error([&] { BertShardReader reader(path); }, {path, "has a chunked layout message of", "for a dataspace of rank"});
  }
}

// libhdf5 1.10 looks names up through the root group's symbol table and reads its local heap
// without checking it against the file: a damaged one killed the process with SIGSEGV inside
// H5Lexists (found by fuzzing; the reproducer is in the fuzz corpus). The reader must refuse such a
// root group before its first lookup. Our files' root group is the only old-style group, so its
// B-tree node is the one "TREE" of node type 0 and its local heap the one "HEAP".
TEST(BertHdf5, DamagedRootGroupIsAnErrorNotACrash) {
  const std::string found = testing::source_dir() + "/tests/fuzz/corpus/bert_hdf5/root-group-symbol-table-past-the-file.hdf5";
  expect_read_error(found, {found, "byte 120: the root group's symbol table message names a B-tree at address"});
  TempDir dir;
  std::string good = dir.file("good.hdf5");
  write_random(good, 20, 16, 4, 8);
  const std::string bytes = read_file(good);
  const size_t heap = bytes.find("HEAP"), tree = bytes.find(std::string("TREE\0", 5));
  ASSERT_NE(heap, std::string::npos);
  ASSERT_NE(tree, std::string::npos);
  ASSERT_EQ(bytes.find("HEAP", heap + 1), std::string::npos) << "expected one local heap";
  struct Damage {
    size_t at;
    std::string with, expected;
  };
  const Damage damages[] = {
      {heap, "PAEH", "a local heap at address"},
      {heap + 8, le64(uint64_t{1} << 40), "bytes of names at address"},  // the names' size
      {heap + 24, le64(bytes.size()), "bytes of names at address"},      // their address
      {tree, "EERT", "a B-tree at address"},
      {tree + 4, std::string(1, '\1'), "a B-tree at address"},  // a chunk B-tree node, not a group's
  };
  for (const Damage& d : damages) {
    std::string path = damaged_copy(dir, bytes, d.at, d.with, cat("root-", d.at));
    expect_read_error(path, {path, "the root group's symbol table message names", d.expected, "the file is damaged"});
  }
  BertShardReader reader(good);  // and the undamaged file still opens
  EXPECT_EQ(reader.size(), 20);
}

// A chunk index (v1 B-tree) whose root's level byte was damaged (0 → 255) made libhdf5 1.10 take
// chunk addresses for child nodes and die with SIGSEGV (a null read in H5F__accum_read under
// H5B_iterate, from H5Dget_chunk_info_by_coord; found by fuzzing, the reproducer is in the fuzz
// corpus). Every node must be a whole chunk node one level below its parent. A node is "TREE",
// node type (1: chunks), level, entries (2 bytes), siblings, then keys and children.
TEST(BertHdf5, DamagedChunkIndexIsAnErrorNotACrash) {
  const std::string found = testing::source_dir() + "/tests/fuzz/corpus/bert_hdf5/chunk-index-root-at-level-255.hdf5";
  // Its root's keys are damaged too, and the key-order check (ChunkIndexKeysOutOfOrderAreAnError-
  // NotACrash) refuses them before the walk reaches the child at address 680 that libhdf5 died on;
  // the damages below change the level alone.
  expect_read_error(found, {found, "byte 2936", "has a chunk index (v1 B-tree) node at address 2936, its root, whose entry 2 "
                            "is chunk (12, 131074, 34), not after entry 1's (48, 0, 34)"});
  TempDir dir;
  std::string good = dir.file("good.hdf5");
  auto records = write_random(good, 200, 16, 4, 1);  // 200 one-record chunks: more than a node's 64
  expect_reads_back(good, records, 16, 4);            // so the root is at level 1, and reads
  const std::string bytes = read_file(good);
  const size_t root = bytes.find(std::string("TREE\1\1", 6)), leaf = bytes.find(std::string("TREE\1\0", 6));
  ASSERT_NE(root, std::string::npos) << "expected a two-level chunk index";
  ASSERT_NE(leaf, std::string::npos);
  struct Damage {
    size_t at;
    std::string with, expected;
  };
  const Damage damages[] = {
      {root + 5, std::string(1, '\xff'), "expected at level 254, at level 0"},  // its children are leaves
      {root + 5, std::string(1, '\2'), "expected at level 1, at level 0"},  // its children are leaves
      {leaf, "TREX", "expected at level 0, that is not a chunk B-tree node"},
      {leaf + 6, std::string("\xff\0", 2), "at level 0 with 255 entries (at most 64)"},
  };
  for (const Damage& d : damages) {
    std::string path = damaged_copy(dir, bytes, d.at, d.with, cat("index-", d.at, "-", static_cast<int>(d.with[0])));
    expect_read_error(path, {path, "has a chunk index (v1 B-tree) node at address", d.expected, "the file is damaged"});
  }
}

// libhdf5 1.10's H5Dread finds a chunk by binary search over its index's keys, while
// H5Dget_chunk_info_by_coord, which the reader's checks of a chunk's stored bytes use, took the
// first match. A leaf listing chunk (0, 0) twice, the second time 26 bytes with gzip marked
// skipped, passed those checks, then H5Dread copied a whole 64-byte chunk out of the 26 bytes
// (ASan: heap-buffer-overflow in H5VM_memcpyvv; found by fuzzing). Keys out of order, in a node or
// against its parent's, must be refused before libhdf5 reads a chunk.
TEST(BertHdf5, ChunkIndexKeysOutOfOrderAreAnErrorNotACrash) {
  const std::string found = testing::source_dir() + "/tests/fuzz/corpus/bert_hdf5/chunk-index-keys-out-of-order.hdf5";
  expect_read_error(found, {found, "byte 2936", "dataset 'input_ids' has a chunk index (v1 B-tree) node at address 2936, "
                            "its root, whose entry 2 is chunk (0, 0, 0), not after entry 1's (1, 0, 0)"});
  TempDir dir;
  std::string good = dir.file("good.hdf5");
  auto records = write_random(good, 200, 16, 4, 1);  // 200 one-record chunks: a root over leaves
  expect_reads_back(good, records, 16, 4);
  const std::string bytes = read_file(good);
  auto u64 = [&](size_t at) {
    uint64_t v = 0;
    std::memcpy(&v, bytes.data() + at, 8);
    return v;
  };
  // A leaf of a rank-2 dataset: 24-byte header, then keys of 32 bytes (size, filter mask, three
  // offsets) between 8-byte child addresses. Key i's row offset is at 24 + 40 i + 8; with one row
  // per chunk, consecutive keys hold consecutive rows.
  auto row_at = [](size_t leaf, uint64_t i) { return leaf + 24 + 40 * i + 8; };
  size_t first = std::string::npos, later = std::string::npos;  // leaves whose first row is 0, and not 0
  for (size_t at = bytes.find(std::string("TREE\1\0", 6)); at != std::string::npos; at = bytes.find(std::string("TREE\1\0", 6), at + 1)) {
    uint64_t row = u64(row_at(at, 0));
    if (u64(row_at(at, 1)) != row + 1 || u64(row_at(at, 2)) != row + 2 || u64(row_at(at, 1) + 8) != 0) continue;
    (row == 0 ? first : later) = at;
  }
  ASSERT_NE(first, std::string::npos) << "expected a rank-2 leaf starting at row 0";
  ASSERT_NE(later, std::string::npos) << "expected a rank-2 leaf starting past row 0";
  const uint64_t last = u64(first + 6) & 0xffff, later_row = u64(row_at(later, 0));
  ASSERT_GE(last, 3u);
  struct Damage {
    size_t at;
    uint64_t row;
    std::string expected;
  };
  const Damage damages[] = {
      {row_at(first, 1), 0, "whose entry 1 is chunk (0, 0, 0), not after entry 0's (0, 0, 0)"},  // a duplicate
      {row_at(first, 1), 2, "whose entry 2 is chunk (2, 0, 0), not after entry 1's (2, 0, 0)"},
      {row_at(first, 2), 1, "whose entry 2 is chunk (1, 0, 0), not after entry 1's (1, 0, 0)"},
      {row_at(first, last - 1), 199, cat("whose entry ", last - 1, " is chunk (199, 0, 0), not before its parent's next key")},
      {row_at(later, 0), 0, cat("whose first entry is chunk (0, 0, 0), before its parent's key (", later_row, ", 0, 0)")},
  };
  for (const Damage& d : damages) {
    std::string path = damaged_copy(dir, bytes, d.at, le64(d.row), cat("keys-", d.at, "-", d.row));
    expect_read_error(path, {path, "has a chunk index (v1 B-tree) node at address", d.expected, "the file is damaged"});
  }
}

// A header message flagged shared (flags bit 1) whose encoding (version 2 or 3, then 1) says it
// lives in the file's shared-message heap made libhdf5 1.10 look it up through a shared-message
// table the file does not have (SIGSEGV: a null read in H5F__accum_read under
// H5SM_get_fheap_addr, inside H5Dopen2; found by fuzzing). The reader must refuse it first.
TEST(BertHdf5, SharedMessageInAHeapTheFileLacksIsAnErrorNotACrash) {
  const std::string found = testing::source_dir() + "/tests/fuzz/corpus/bert_hdf5/fill-value-in-a-shared-message-heap-the-file-lacks.hdf5";
  expect_read_error(found, {found, "byte 1768: dataset 'segment_ids' has a header message (type 5) kept in the shared-message "
                            "heap of a file that has none: the file is damaged"});
  TempDir dir;
  std::string good = dir.file("good.hdf5");
  write_random(good, 20, 16, 4, 8);
  const std::string bytes = read_file(good);
  // input_ids' fill value message: type 5, 8 bytes, flags 1 (constant), then version 2, ...
  const size_t fill = bytes.find(std::string("\5\0\10\0\1\0\0\0\2\3\2\1", 12));
  ASSERT_NE(fill, std::string::npos);
  for (const char* version : {"\2", "\3"}) {
    // flags: shared (then 3 reserved bytes); the message: this version, in the shared-message heap
    std::string path = damaged_copy(dir, bytes, fill + 4, std::string("\2\0\0\0", 4) + version + "\1",
                                    cat("shared-v", static_cast<int>(version[0])));
    expect_read_error(path, {path, cat("byte ", fill + 8, ": dataset 'input_ids' has a header message (type 5) kept in the "
                                       "shared-message heap of a file that has none")});
  }
}

// HDF5's superblock is at byte 0 or after a user block, at 512·2^k; anything else is refused
// before libhdf5 sees it, naming the file, byte 0 and its size.
TEST(Hdf5Guards, TheSignatureIsAtByteZeroOrAfterAUserBlock) {
  TempDir dir;
  const std::string ours = dir.file("ours.hdf5");
  write_random(ours, 4, 8, 2, 2);
  EXPECT_NO_THROW(hdf5::check_hdf5_signature(ours));
  for (hsize_t userblock : {512, 2048}) {
    const std::string path = dir.file(cat("userblock-", userblock, ".hdf5"));
    write_foreign(path, raw_layout(4, 6, 3), userblock);
    EXPECT_NO_THROW(hdf5::check_hdf5_signature(path)) << userblock;
    EXPECT_EQ(BertShardReader(path).size(), 4) << userblock;
  }
  const std::string bytes = read_file(ours);
  const std::string shifted = dir.file("shifted.hdf5");  // the signature at byte 100
  write_file_atomic(shifted, std::string(100, '\0') + bytes);
  const std::string empty = dir.file("empty.hdf5");
  write_file_atomic(empty, "");
  struct Case {
    std::string path, size;
  };
  for (const Case& c : {Case{shifted, cat("file is ", bytes.size() + 100, " bytes")}, Case{empty, "file is 0 bytes"}}) {
    const Error e = error_of([&] { hdf5::check_hdf5_signature(c.path); });
    EXPECT_EQ(e.where().file, c.path);
    EXPECT_EQ(e.where().offset, 0);
    EXPECT_NE(std::string(e.what()).find("not an HDF5 file: no HDF5 signature at byte 0 or 512"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(c.size), std::string::npos) << e.what();
  }
  expect_error([&] { hdf5::check_hdf5_signature(dir.file("missing.hdf5")); }, {"missing.hdf5"});
}

// Called directly, the guards pass every dataset of an undamaged file, chunked, contiguous or
// compact, and refuse a damaged one at the byte offset of the message or node at fault.
TEST(Hdf5Guards, DirectCallsPassAGoodFileAndNameTheOffsetOfTheDamage) {
  TempDir dir;
  const std::string good = dir.file("plain.hdf5"), other = dir.file("other.hdf5");
  write_random(good, 20, 16, 4, 8);  // the shard files_with_layout damages below
  auto sets = foreign_layout(5, 6, 3);
  sets[0].compact = true;  // input_ids compact, segment_ids and masked_lm_ids contiguous, the rest chunked
  write_foreign(other, sets);
  for (const std::string& path : {good, other}) {
    OpenFile f(path);
    ASSERT_GE(f.id, 0);
    EXPECT_NO_THROW(hdf5::check_root_group(path, f.map, f.id)) << path;
    for (const char* name : {"input_ids", "input_mask", "segment_ids", "masked_lm_positions", "masked_lm_ids",
                             "next_sentence_labels"})
      EXPECT_NO_THROW(hdf5::check_chunked_layout(path, f.map, f.id, name)) << path << " " << name;
    expect_error([&] { hdf5::check_chunked_layout(path, f.map, f.id, "position_ids"); },
                 {path, "cannot read the object header of dataset 'position_ids'"});
  }
  // A zero chunk dimension: at the layout message's data, 8 bytes after the message's header.
  const auto zero = files_with_layout(dir, [](std::string& bytes, size_t at) { std::memset(bytes.data() + at + 8 + 3 + 8, 0, 4); });
  ASSERT_FALSE(zero.empty());
  const std::string bytes = read_file(good);
  size_t first_layout = 0;  // as files_with_layout finds them
  auto is_layout = [&](size_t at) {
    return bytes[at] == 8 && bytes[at + 1] == 0 && bytes[at + 8] == 3 && bytes[at + 9] == 2 && (bytes[at + 10] == 2 || bytes[at + 10] == 3);
  };
  while (first_layout + 11 < bytes.size() && !is_layout(first_layout)) ++first_layout;
  {
    OpenFile f(zero[0]);
    ASSERT_GE(f.id, 0);
    int refused = 0;
    for (const char* name : {"input_ids", "input_mask", "segment_ids", "masked_lm_positions", "masked_lm_ids",
                             "next_sentence_labels"}) {
      try {
        hdf5::check_chunked_layout(zero[0], f.map, f.id, name);
      } catch (const Error& e) {
        ++refused;
        EXPECT_EQ(e.where().file, zero[0]);
        EXPECT_EQ(e.where().offset, int64_t(first_layout + 8)) << e.what();
        EXPECT_NE(std::string(e.what()).find("has a chunk dimension of 0 in its layout message"), std::string::npos) << e.what();
      }
    }
    EXPECT_EQ(refused, 1) << "the damage is in one dataset's layout message";
  }
  // The root group's symbol table message names its B-tree and local heap: damage the heap and the
  // guard names the message's data, where the two addresses are.
  const size_t heap = bytes.find("HEAP"), tree = bytes.find(std::string("TREE\0", 5));
  ASSERT_NE(heap, std::string::npos);
  ASSERT_NE(tree, std::string::npos);
  // The message (type 17, 16 bytes of data, after 8 bytes of message header) in the root group's
  // object header; the superblock caches the same two addresses before it.
  size_t stab = bytes.find(le64(tree) + le64(heap));
  while (stab != std::string::npos && (stab < 8 || bytes.compare(stab - 8, 4, std::string("\x11\0\x10\0", 4)) != 0))
    stab = bytes.find(le64(tree) + le64(heap), stab + 1);
  ASSERT_NE(stab, std::string::npos) << "expected the symbol table message to hold the two addresses";
  const std::string damaged = damaged_copy(dir, bytes, heap, "PAEH", "heap");
  OpenFile f(damaged);
  ASSERT_GE(f.id, 0);
  const Error e = error_of([&] { hdf5::check_root_group(damaged, f.map, f.id); });
  EXPECT_EQ(e.where().file, damaged);
  EXPECT_EQ(e.where().offset, int64_t(stab));
  EXPECT_NE(std::string(e.what()).find(cat("names a local heap at address ", heap)), std::string::npos) << e.what();
}

}  // namespace
}  // namespace pretrain::hdf5_guards_test
