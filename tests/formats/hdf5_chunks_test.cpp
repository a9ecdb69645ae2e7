// HDF5 plumbing of formats/hdf5_chunks.cpp: numpy's spelling of a dataset's type, HDF5's error
// stack folded into our Errors (and cleared), ids closed by RAII, and ChunkFile: where a chunk's
// stored bytes lie, per the chunk index, checked against the size a chunk may take and the file's
// end (after a user block too), and read from there.
#include "formats/hdf5_chunks.h"

#include <gtest/gtest.h>
#include <hdf5.h>
#include <zlib.h>

#include <cstdint>
#include <string>
#include <vector>

#include "bert_hdf5_fixture.h"
#include "common/error.h"
#include "common/file.h"
#include "test_util.h"

namespace pretrain::hdf5_chunks_test {
namespace {

using bert_hdf5_fixture::damaged_copy;
using bert_hdf5_fixture::expect_error;
using bert_hdf5_fixture::expect_read_error;
using bert_hdf5_fixture::raw_layout;
using bert_hdf5_fixture::write_foreign;
using bert_hdf5_fixture::write_random;
using hdf5::ChunkFile;
using hdf5::Hid;
using testing::TempDir;

// `path` and its dataset `name` opened read-only.
struct Opened {
  Opened(const std::string& path, const char* name)
      : file((hdf5::quiet_hdf5(), H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT)), H5Fclose),
        set(H5Dopen2(file.get(), name, H5P_DEFAULT), H5Dclose) {}
  Hid file, set;
};

// Rows [0, rows) of a rank-2 int32 dataset, as HDF5 reads them.
std::vector<int32_t> first_rows(hid_t set, hsize_t rows, hsize_t width) {
  std::vector<int32_t> v(rows * width);
  hsize_t start[2] = {0, 0}, count[2] = {rows, width};
  Hid space(H5Dget_space(set), H5Sclose), memory(H5Screate_simple(2, count, nullptr), H5Sclose);
  H5Sselect_hyperslab(space.get(), H5S_SELECT_SET, start, nullptr, count, nullptr);
  EXPECT_GE(H5Dread(set, H5T_NATIVE_INT32, memory.get(), space.get(), H5P_DEFAULT, v.data()), 0);
  return v;
}

// A chunk index entry with an address and 0 stored bytes made libhdf5 1.10 copy a whole chunk out
// of a shorter buffer (ASan: heap-buffer-overflow in H5VM_memcpyvv under H5Dread; found by fuzzing,
// the reproducer is in the fuzz corpus). Both read paths must refuse it. A chunk B-tree node is
// "TREE", type 1, level, entries (2), two sibling addresses, then keys: stored size (4), filter
// mask (4), offsets; the first key's size is set to 0.
TEST(BertHdf5, ChunkWithAnAddressAndNoStoredBytesIsAnError) {
  const std::string found = testing::source_dir() + "/tests/fuzz/corpus/bert_hdf5/chunk-with-an-address-and-0-stored-bytes.hdf5";
  // Damaged elsewhere too (input_ids' chunk index lists chunk (0, 0) twice; segment_ids' index
  // root is zeros), which the reader refuses first since the chunk index guards; the file below
  // has the one damage.
  expect_read_error(found, {found, "dataset 'input_ids' has a chunk index (v1 B-tree) node at address 2936, its root, "
                            "whose entry 1 is chunk (0, 0, 0), not after entry 0's (0, 0, 0)"});
  TempDir dir;
  std::string good = dir.file("good.hdf5");
  write_random(good, 20, 16, 4, 8);
  const std::string bytes = read_file(good);
  const size_t tree = bytes.find(std::string("TREE\1\0", 6));
  ASSERT_NE(tree, std::string::npos);
  std::string path = damaged_copy(dir, bytes, tree + 24, std::string(4, '\0'), "empty-chunk");
  expect_read_error(path, {path, "claims 0 stored bytes at address", "a written chunk is never empty"});
}

TEST(Hdf5Chunks, NumpyDtypeSpellsTypesAsNumpyDoes) {
  EXPECT_EQ(hdf5::numpy_dtype(H5T_STD_I32LE), "<i4");
  EXPECT_EQ(hdf5::numpy_dtype(H5T_STD_I64BE), ">i8");
  EXPECT_EQ(hdf5::numpy_dtype(H5T_STD_U16LE), "<u2");
  EXPECT_EQ(hdf5::numpy_dtype(H5T_STD_I8LE), "|i1");  // one byte has no order
  EXPECT_EQ(hdf5::numpy_dtype(H5T_STD_U8BE), "|u1");
  EXPECT_EQ(hdf5::numpy_dtype(H5T_IEEE_F32LE), cat("class ", int(H5T_FLOAT)));
}

// A failed HDF5 call's messages come back in the Error (innermost first, at most three), and
// reading them clears the stack; checked() throws for a failure and owns a good id.
TEST(Hdf5Chunks, Hdf5ErrorsFoldIntoOursAndTheStackIsCleared) {
  TempDir dir;
  const std::string missing = dir.file("missing.hdf5");
  hdf5::quiet_hdf5();
  EXPECT_LT(H5Fopen(missing.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), 0);
  const std::string taken = hdf5::take_hdf5_errors();
  EXPECT_EQ(taken.rfind("HDF5: ", 0), 0u) << taken;
  EXPECT_GT(taken.size(), 6u);
  EXPECT_EQ(hdf5::take_hdf5_errors(), "HDF5 reported no detail");
  EXPECT_LT(H5Fopen(missing.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), 0);
  expect_error([&] { hdf5::checked(H5Fopen(missing.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose, Where{missing}, "cannot open"); },
               {missing, "cannot open (HDF5: "});
  EXPECT_EQ(hdf5::take_hdf5_errors(), "HDF5 reported no detail") << "the failed call's messages were left on the stack";
  expect_error([&] { hdf5::throw_hdf5(Where::at_record(missing, 7), "no luck"); }, {missing, "record 7", "no luck (HDF5 reported no detail)"});

  const std::string path = dir.file("shard.hdf5");
  write_random(path, 3, 8, 2, 2);
  Hid file = hdf5::checked(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose, Where{path}, "cannot open");
  ASSERT_TRUE(file.valid());
  const hid_t id = file.get();
  Hid moved(std::move(file));
  EXPECT_FALSE(file.valid());
  EXPECT_EQ(moved.get(), id);
  EXPECT_GT(H5Iis_valid(id), 0);
  EXPECT_TRUE(moved.close());
  EXPECT_FALSE(moved.valid());
  EXPECT_LE(H5Iis_valid(id), 0) << "close() closed the file";
  EXPECT_TRUE(moved.close()) << "closing nothing succeeds";
}

// locate() gives each written chunk's stored bytes inside the file, addresses counted from the
// superblock (after a user block too); read() gives those bytes, which inflate to the chunk as
// HDF5 reads it. Asking for fewer stored bytes than a chunk has is an Error naming the chunk.
TEST(Hdf5Chunks, LocateAndReadGiveAChunksStoredBytes) {
  TempDir dir;
  const std::string ours = dir.file("ours.hdf5"), userblock = dir.file("userblock.hdf5");
  write_random(ours, 20, 16, 4, 8);            // input_ids chunks of 8 x 16
  write_foreign(userblock, raw_layout(10, 6, 3), 1024);  // of 3 x 6, after 1024 bytes
  struct Case {
    std::string path;
    hsize_t rows, width;
  };
  for (const Case& c : {Case{ours, 8, 16}, Case{userblock, 3, 6}}) {
    SCOPED_TRACE(c.path);
    Opened f(c.path, "input_ids");
    ChunkFile chunks(c.path, f.file.get());
    const size_t chunk_bytes = size_t(c.rows * c.width * 4);
    const hsize_t origin[2] = {0, 0};
    const ChunkFile::Stored s = chunks.locate(f.set.get(), origin, compressBound(uLong(chunk_bytes)), chunk_bytes,
                                              Where{c.path}, "chunk 0");
    ASSERT_GT(s.size, 0u);
    EXPECT_EQ(s.skipped_filters, 0u);
    EXPECT_LE(s.addr + s.size, file_size(c.path));
    std::vector<uint8_t> stored(s.size);
    chunks.read(s, stored.data(), Where{c.path}, "chunk 0");
    std::vector<int32_t> values(c.rows * c.width);
    uLongf out = uLongf(chunk_bytes);
    ASSERT_EQ(uncompress(reinterpret_cast<Bytef*>(values.data()), &out, stored.data(), uLong(stored.size())), Z_OK);
    EXPECT_EQ(out, chunk_bytes);
    EXPECT_EQ(values, first_rows(f.set.get(), c.rows, c.width));
    expect_error([&] { chunks.locate(f.set.get(), origin, s.size - 1, chunk_bytes, Where::at_record(c.path, 0), "chunk 0"); },
                 {c.path, "record 0", cat("chunk 0 claims ", s.size, " stored bytes, expected at most ", s.size - 1, " for a ",
                                          chunk_bytes, "-byte chunk")});
  }
  expect_error([&] { Opened f(ours, "input_ids"); ChunkFile(dir.file("gone.hdf5"), f.file.get()); }, {"gone.hdf5"});
}

// A chunk index that points past the end of the file (here: a file cut after its index was read)
// is refused by locate(), and a read() that runs out of file is an Error, not a short buffer.
TEST(Hdf5Chunks, ChunksPastTheEndOfTheFileAreErrors) {
  TempDir dir;
  const std::string whole = dir.file("whole.hdf5");
  write_random(whole, 20, 16, 4, 8);
  const std::string bytes = read_file(whole);
  Opened f(whole, "input_ids");
  const hsize_t origin[2] = {0, 0};
  const ChunkFile::Stored s = ChunkFile(whole, f.file.get()).locate(f.set.get(), origin, 4096, 512, Where{whole}, "chunk 0");
  ASSERT_GT(s.size, 1u);
  const std::string cut = dir.file("cut.hdf5");
  write_file_atomic(cut, std::string_view(bytes).substr(0, s.addr + s.size / 2));
  ChunkFile chunks(cut, f.file.get());  // the index of `whole`, the bytes of `cut`
  expect_error([&] { chunks.locate(f.set.get(), origin, 4096, 512, Where{cut}, "chunk 0"); },
               {cut, cat("chunk 0 claims ", s.size, " bytes at address ", s.addr, ", past the end of the ",
                         s.addr + s.size / 2, "-byte file")});
  std::vector<uint8_t> out(s.size);
  expect_error([&] { chunks.read(s, out.data(), Where{cut}, "chunk 0"); },
               {cut, cat("chunk 0: file ends ", s.size / 2, " bytes into its ", s.size, " stored bytes")});
}

}  // namespace
}  // namespace pretrain::hdf5_chunks_test
