// What the tests of the BERT HDF5 modules (bert_hdf5_*_test.cpp, hdf5_*_test.cpp) share: random
// records and shards written by our writer, files in other layouts written through HDF5 itself
// (as h5py would), damaged copies of a file, and the checks that a file reads back or is refused
// with an Error naming what is wrong.
#pragma once
#include <gtest/gtest.h>
#include <hdf5.h>

#include <cstdint>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "bert_record_expect.h"
#include "common/error.h"
#include "common/file.h"
#include "formats/bert_hdf5.h"
#include "test_util.h"

namespace pretrain::bert_hdf5_fixture {

using testing::TempDir;

// An unpacked instance of 2..seq tokens, fields as long as its tokens (the writer pads).
inline BertRecord random_record(std::mt19937& rng, int64_t seq, int64_t max_pred) {
  BertRecord r;
  int64_t tokens = std::uniform_int_distribution<int64_t>(2, seq)(rng);
  int64_t split = std::uniform_int_distribution<int64_t>(1, tokens - 1)(rng);
  for (int64_t j = 0; j < tokens; ++j) {
    r.input_ids.push_back(std::uniform_int_distribution<int32_t>(0, 30521)(rng));
    r.input_mask.push_back(1);
    r.segment_ids.push_back(j >= split);
  }
  int64_t preds = std::uniform_int_distribution<int64_t>(0, std::min(max_pred, tokens - 1))(rng);
  for (int64_t k = 0; k < preds; ++k) {
    r.masked_lm_positions.push_back(static_cast<int32_t>(1 + k));
    r.masked_lm_ids.push_back(std::uniform_int_distribution<int32_t>(0, 30521)(rng));
  }
  r.next_sentence_label = static_cast<int32_t>(rng() & 1);
  return r;
}

// The record as the file holds it: every field padded with zeros to its full width.
inline BertRecord padded(BertRecord r, int64_t seq, int64_t max_pred) {
  for (auto* v : {&r.input_ids, &r.input_mask, &r.segment_ids}) v->resize(static_cast<size_t>(seq), 0);
  for (auto* v : {&r.masked_lm_positions, &r.masked_lm_ids}) v->resize(static_cast<size_t>(max_pred), 0);
  return r;
}

// A packed row of 1..max_pack random instances (the layout of bert_hdf5.h), fields as long as
// the row's tokens (the writer pads).
inline BertRecord random_packed_record(std::mt19937& rng, int64_t seq, int64_t max_pred, int64_t max_pack) {
  BertRecord row;
  const int64_t k = std::uniform_int_distribution<int64_t>(1, std::min(max_pack, seq / 2))(rng);
  for (int64_t j = 0; j < k; ++j) {
    const int64_t room = seq - static_cast<int64_t>(row.input_ids.size()) - 2 * (k - j - 1);
    const int64_t preds_room = max_pred - static_cast<int64_t>(row.masked_lm_positions.size());
    BertRecord one = random_record(rng, std::min<int64_t>(room, 2 + static_cast<int64_t>(rng() % 9)), preds_room);
    const auto offset = static_cast<int32_t>(row.input_ids.size());
    row.next_sentence_positions.push_back(offset);
    row.packed_next_sentence_labels.push_back(one.next_sentence_label);
    if (j == 0) row.next_sentence_label = one.next_sentence_label;
    for (size_t t = 0; t < one.input_ids.size(); ++t) {
      row.input_ids.push_back(one.input_ids[t]);
      row.input_mask.push_back(1);
      row.segment_ids.push_back(one.segment_ids[t]);
      row.position_ids.push_back(static_cast<int32_t>(t));
      row.sequence_ids.push_back(static_cast<int32_t>(j + 1));
    }
    for (size_t p = 0; p < one.masked_lm_positions.size(); ++p) {
      row.masked_lm_positions.push_back(offset + one.masked_lm_positions[p]);
      row.masked_lm_ids.push_back(one.masked_lm_ids[p]);
    }
  }
  return row;
}

inline BertRecord padded_packed(BertRecord r, int64_t seq, int64_t max_pred, int64_t max_pack) {
  r = padded(std::move(r), seq, max_pred);
  for (auto* v : {&r.position_ids, &r.sequence_ids}) v->resize(static_cast<size_t>(seq), 0);
  r.next_sentence_positions.resize(static_cast<size_t>(max_pack), 0);
  r.packed_next_sentence_labels.resize(static_cast<size_t>(max_pack), -1);
  return r;
}

// A packed row of two instances, [CLS] 5 [SEP] and [CLS] 6 [SEP], each with one prediction; a
// shard of seq_len 8 and max_predictions 2 (or more) takes it.
inline BertRecord two_instance_row() {
  return {{101, 5, 102, 101, 6, 102}, {1, 1, 1, 1, 1, 1}, {0, 0, 1, 0, 0, 1}, {1, 4}, {7, 8}, 1,
          {0, 1, 2, 0, 1, 2},         {1, 1, 1, 2, 2, 2}, {0, 3},             {1, 0}};
}

// Writes n random records (half one by one, half as batches) and returns them padded. With
// max_pack > 0 the rows are packed (random_packed_record).
inline std::vector<BertRecord> write_random(const std::string& path, int64_t n, int64_t seq, int64_t max_pred,
                                            int64_t per_chunk, uint32_t seed = 1, int64_t max_pack = 0) {
  std::mt19937 rng(seed);
  std::vector<BertRecord> records;
  BertShardOptions options;
  options.records_per_chunk = per_chunk;
  options.in_flight_chunks = 2;
  options.max_pack = max_pack;
  auto next = [&] {
    return max_pack > 0 ? padded_packed(random_packed_record(rng, seq, max_pred, max_pack), seq, max_pred, max_pack)
                        : padded(random_record(rng, seq, max_pred), seq, max_pred);
  };
  BertShardWriter writer(path, seq, max_pred, options);
  while (static_cast<int64_t>(records.size()) < n) {
    int64_t left = n - static_cast<int64_t>(records.size());
    if (records.size() % 2 == 0 || left < 5) {
      records.push_back(next());
      writer.append(records.back());
    } else {
      int64_t take = std::min<int64_t>(left, 1 + static_cast<int64_t>(rng() % 11));
      BertBatch batch(take, seq, max_pred, max_pack);
      for (int64_t i = 0; i < take; ++i) {
        records.push_back(next());
        batch.set(i, records.back());
      }
      writer.append(batch);
    }
  }
  EXPECT_EQ(writer.size(), n);
  writer.commit();
  return records;
}

// Reads `path` on both read paths, record by record and in ranges crossing every chunk boundary,
// expecting `records`.
inline void expect_reads_back(const std::string& path, const std::vector<BertRecord>& records, int64_t seq,
                              int64_t max_pred, int64_t max_pack = 0) {
  for (auto read_path : {BertReadPath::automatic, BertReadPath::hyperslab}) {
    BertShardReader reader(path, read_path);
    ASSERT_EQ(reader.size(), static_cast<int64_t>(records.size()));
    EXPECT_EQ(reader.seq_len(), seq);
    EXPECT_EQ(reader.max_predictions(), max_pred);
    EXPECT_EQ(reader.max_pack(), max_pack);
    EXPECT_EQ(reader.raw_chunk_path(), read_path == BertReadPath::automatic);
    for (size_t i = 0; i < records.size(); ++i)
      testing::expect_same_record(reader.read(static_cast<int64_t>(i)), records[i], static_cast<int64_t>(i));
    // Ranges of every length from every start cover chunk boundaries from both sides.
    BertBatch batch;
    for (int64_t begin = 0; begin < reader.size(); begin += 3)
      for (int64_t count : {int64_t{1}, int64_t{5}, reader.size() - begin}) {
        count = std::min(count, reader.size() - begin);
        reader.read_range(begin, count, batch);
        ASSERT_EQ(batch.size, count);
        for (int64_t i = 0; i < count; ++i)
          testing::expect_same_record(batch.record(i), records[static_cast<size_t>(begin + i)], begin + i);
      }
  }
}

// f() throws an Error whose message holds every one of `parts`.
inline void expect_error(const std::function<void()>& f, const std::vector<std::string>& parts) {
  try {
    f();
    ADD_FAILURE() << "no error; expected one mentioning " << parts.front();
  } catch (const Error& e) {
    for (const auto& p : parts) EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what() << " lacks " << p;
  }
}

// Opens `path` and reads every record, on both read paths, expecting an Error naming `expected`.
inline void expect_read_error(const std::string& path, const std::vector<std::string>& expected) {
  for (auto read_path : {BertReadPath::automatic, BertReadPath::hyperslab})
    expect_error([&] {
      BertShardReader reader(path, read_path);
      BertBatch b;
      reader.read_range(0, reader.size(), b);
    }, expected);
}

// A dataset in the layout h5py would write from other dtypes: int64 and uint8, contiguous, compact
// or odd chunks.
struct ForeignDataset {
  std::string name;
  hid_t type;
  std::vector<hsize_t> dims;
  std::vector<int64_t> values;  // empty: never written
  std::vector<hsize_t> chunk;   // empty: contiguous (compact when `compact`); else [shuffle +] gzip 1
  bool compact = false;
  bool shuffle = true;
};

// The datasets in a new file at `path`, after a user block of `userblock` bytes (0, or 512·2^k).
inline void write_foreign(const std::string& path, const std::vector<ForeignDataset>& sets, hsize_t userblock = 0) {
  hid_t fcpl = H5Pcreate(H5P_FILE_CREATE);
  H5Pset_userblock(fcpl, userblock);
  hid_t file = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, fcpl, H5P_DEFAULT);
  H5Pclose(fcpl);
  ASSERT_GE(file, 0);
  for (const auto& s : sets) {
    hid_t space = H5Screate_simple(static_cast<int>(s.dims.size()), s.dims.data(), nullptr);
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    if (!s.chunk.empty()) {
      H5Pset_chunk(dcpl, static_cast<int>(s.chunk.size()), s.chunk.data());
      if (s.shuffle) H5Pset_shuffle(dcpl);
      H5Pset_deflate(dcpl, 1);
    } else if (s.compact) {
      H5Pset_layout(dcpl, H5D_COMPACT);
    }
    hid_t d = H5Dcreate2(file, s.name.c_str(), s.type, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    ASSERT_GE(d, 0);
    if (!s.values.empty()) {
      ASSERT_GE(H5Dwrite(d, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, s.values.data()), 0);
    }
    H5Dclose(d), H5Pclose(dcpl), H5Sclose(space);
  }
  H5Fclose(file);
}

// NVIDIA's six datasets for n records in other widths and layouts: value i of a dataset is
// i % mod + add (input_ids: i % 30000; masks, segments and labels: i % 2; positions: i % (seq-1) + 1;
// masked_lm_ids: i % 999 + 5).
inline std::vector<ForeignDataset> foreign_layout(int64_t n, int64_t seq, int64_t mp) {
  auto fill = [](int64_t count, int64_t mod, int64_t add) {
    std::vector<int64_t> v(static_cast<size_t>(count));
    for (int64_t i = 0; i < count; ++i) v[static_cast<size_t>(i)] = i % mod + add;
    return v;
  };
  auto N = static_cast<hsize_t>(n), S = static_cast<hsize_t>(seq), P = static_cast<hsize_t>(mp);
  return {{"input_ids", H5T_STD_I64BE, {N, S}, fill(n * seq, 30000, 0), {}},
          {"input_mask", H5T_STD_U8LE, {N, S}, fill(n * seq, 2, 0), {3, 2}},
          {"segment_ids", H5T_STD_I16LE, {N, S}, fill(n * seq, 2, 0), {}},
          {"masked_lm_positions", H5T_STD_I64LE, {N, P}, fill(n * mp, seq - 1, 1), {2, 1}},
          {"masked_lm_ids", H5T_STD_I64LE, {N, P}, fill(n * mp, 999, 5), {}},
          {"next_sentence_labels", H5T_STD_I32LE, {N}, fill(n, 2, 0), {4}}};
}

// The same values in the types and layout of our own files (little-endian int32 and int8, chunks
// of 3 records, gzip alone), which the reader reads as raw chunks.
inline std::vector<ForeignDataset> raw_layout(int64_t n, int64_t seq, int64_t mp) {
  std::vector<ForeignDataset> sets = foreign_layout(n, seq, mp);
  for (ForeignDataset& s : sets) {
    const bool ids = s.name == "input_ids" || s.name.starts_with("masked_lm");
    s.type = ids ? H5T_STD_I32LE : H5T_STD_I8LE;
    s.chunk = s.dims.size() == 2 ? std::vector<hsize_t>{3, s.dims[1]} : std::vector<hsize_t>{3};
    s.shuffle = false;
  }
  return sets;
}

// A copy of `bytes` with `with` written at `at`, as a file in `dir` named for `name`.
inline std::string damaged_copy(const TempDir& dir, std::string bytes, size_t at, std::string_view with,
                                const std::string& name) {
  bytes.replace(at, with.size(), with);
  std::string path = dir.file(name + ".hdf5");
  write_file_atomic(path, bytes);
  return path;
}

inline std::string le64(uint64_t v) {
  std::string s(8, '\0');
  std::memcpy(s.data(), &v, 8);
  return s;
}

// Writes a small shard and returns, for each of its six datasets, a copy of the file whose layout
// message `damage` changed. The layout message of our files is a version-1 object header message
// (type 8), layout version 3, class chunked: 08 00 len len flags 0 0 0 | 03 02 rank+1 |
// address (8) | dims (4 bytes each); `damage` gets the file and the offset of that message.
inline std::vector<std::string> files_with_layout(const TempDir& dir,
                                                  const std::function<void(std::string&, size_t)>& damage) {
  std::string good = dir.file("good.hdf5");
  write_random(good, 20, 16, 4, 8);
  std::string bytes = read_file(good);
  std::vector<std::string> paths;
  for (size_t at = 0; at + 8 + 3 + 8 + 4 <= bytes.size(); ++at) {
    if (bytes[at] != 8 || bytes[at + 1] != 0 || bytes[at + 8] != 3 || bytes[at + 9] != 2) continue;
    if (bytes[at + 10] != 2 && bytes[at + 10] != 3) continue;
    std::string damaged = bytes;
    damage(damaged, at);
    paths.push_back(dir.file(cat("damaged-", paths.size(), ".hdf5")));
    write_file_atomic(paths.back(), damaged);
  }
  EXPECT_EQ(paths.size(), 6u) << "expected one chunked layout message per dataset";
  return paths;
}

// The same, with the first chunk dimension set to `rows`.
inline std::vector<std::string> files_with_chunk_rows(const TempDir& dir, uint32_t rows) {
  return files_with_layout(dir, [&](std::string& bytes, size_t at) { std::memcpy(bytes.data() + at + 8 + 3 + 8, &rows, 4); });
}

}  // namespace pretrain::bert_hdf5_fixture
