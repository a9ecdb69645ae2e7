// BertShardWriter: records staged into row-block chunks, each chunk's columns (six, or ten in a
// packed shard) deflated on oneTBB workers (formats/deflate.h: the zlib-format streams HDF5's gzip
// filter writes, by a faster library than zlib) while the previous generation is stored with direct
// chunk writes, so HDF5 (one global lock in Debian's build) only moves compressed bytes.
#include "formats/bert_hdf5.h"

#include <hdf5.h>
#include <tbb/task_group.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <memory>
#include <vector>

#include "common/error.h"
#include "common/file.h"
#include "formats/bert_hdf5_layout.h"
#include "formats/deflate.h"
#include "formats/hdf5_chunks.h"

namespace pretrain {

using bert_hdf5::column_data;
using bert_hdf5::column_width;
using bert_hdf5::Column;
using bert_hdf5::column_count;
using bert_hdf5::file_type;
using bert_hdf5::kColumns;
using bert_hdf5::Width;
using hdf5::checked;
using hdf5::Hid;
using hdf5::quiet_hdf5;
using hdf5::throw_hdf5;

namespace {

// Default chunk: ~256 KiB of input_ids (512 records at seq_len 128). Big enough that deflate
// reaches its full ratio (its window is 32 KiB) and HDF5's per-chunk cost (a B-tree entry, six
// direct writes) is noise; small enough that a random single-record read inflates little, that
// the writer's in-flight memory stays a few MB, and that a 1M-record shard still splits into
// ~2000 chunks for parallel inflation.
constexpr int64_t kTargetChunkBytes = 256 << 10;

// One row-block: R whole records for every dataset, then each dataset's deflated bytes.
struct WriteChunk {
  int64_t index = 0;  // chunk row index: records [index*R, index*R + rows)
  int64_t rows = 0;
  BertBatch data;  // always R rows; rows past `rows` are zero (the fill value)
  std::array<std::vector<uint8_t>, kColumns.size()> deflated;  // capacity reused; valid up to deflated_size
  std::array<size_t, kColumns.size()> deflated_size{};

  void deflate(size_t column, int level) {
    auto bytes = static_cast<size_t>(column_width(kColumns[column], data.seq_len, data.max_predictions, data.max_pack) *
                                     data.size) *
                 kColumns[column].elem;
    // deflate::compress keeps one compressor per worker thread and level.
    deflated_size[column] = deflate::compress(column_data(data, column), bytes, level, deflated[column]);
  }
};

}  // namespace

struct BertShardWriter::Impl {
  AtomicFile out;
  int64_t seq, max_pred, max_pack, rows_per_chunk;
  size_t columns;  // datasets written: six, ten when packed
  int level;
  size_t generation;  // chunks compressed together
  Hid file;
  std::array<Hid, kColumns.size()> datasets;
  int64_t records = 0;
  int64_t extent = 0;  // rows the datasets currently hold
  bool committed = false;
  bool broken = false;  // a chunk failed to compress or write: the file is incomplete

  std::unique_ptr<WriteChunk> staging;  // being filled by append
  std::vector<std::unique_ptr<WriteChunk>> filled, compressing, spare;
  tbb::task_group workers;

  Impl(const std::string& path, int64_t seq_len, int64_t max_predictions, const BertShardOptions& o)
      : out(path, /*open_fd=*/false), seq(seq_len), max_pred(max_predictions), max_pack(o.max_pack),
        columns(column_count(o.max_pack)), level(o.gzip_level) {
    Where where{path};
    if (seq < 1 || seq > (1 << 24)) throw UsageError(where, cat("seq_len ", seq, " must be in [1, 2^24]"));
    // No masked-LM columns would make [N, 0] datasets, which HDF5 cannot chunk (h5py refuses them;
    // libhdf5 faults writing their chunks) and no BERT trainer reads.
    if (max_pred < 1 || max_pred > (1 << 24))
      throw UsageError(where, cat("max_predictions ", max_pred,
                                  " must be in [1, 2^24]: a BERT shard holds each record's masked-LM predictions"));
    // sequence_ids is int8 and counts instances from 1.
    if (max_pack < 0 || max_pack > 127) throw UsageError(where, cat("max_pack ", max_pack, " must be in [0, 127]"));
    if (level < 0 || level > 9) throw UsageError(where, cat("gzip level ", level, " must be in [0, 9]"));
    rows_per_chunk = o.records_per_chunk > 0 ? o.records_per_chunk : std::max<int64_t>(1, kTargetChunkBytes / (seq * 4));
    // HDF5 caps a chunk at 4 GiB; stay far below it.
    if (rows_per_chunk > (int64_t{1} << 30) / (seq * 4))
      throw UsageError(where, cat("records_per_chunk ", rows_per_chunk, " makes input_ids chunks over 1 GiB"));
    // A fixed generation, not one per thread: the extent grows once per generation, and where HDF5
    // puts its metadata follows those calls, so the file's bytes would otherwise depend on --threads.
    generation = static_cast<size_t>(o.in_flight_chunks > 0 ? o.in_flight_chunks : BertShardOptions::kDefaultInFlightChunks);

    quiet_hdf5();
    Where tmp{out.tmp_path()};
    file = checked(H5Fcreate(out.tmp_path().c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT), H5Fclose, tmp,
                   "cannot create HDF5 file");
    for (size_t c = 0; c < columns; ++c) {
      const Column& col = kColumns[c];
      int rank = col.width == Width::one ? 1 : 2;
      hsize_t dims[2] = {0, static_cast<hsize_t>(column_width(col, seq, max_pred, max_pack))};
      hsize_t max_dims[2] = {H5S_UNLIMITED, dims[1]};
      hsize_t chunk[2] = {static_cast<hsize_t>(rows_per_chunk), std::max<hsize_t>(1, dims[1])};
      Hid space = checked(H5Screate_simple(rank, dims, max_dims), H5Sclose, tmp, "cannot create dataspace");
      Hid dcpl = checked(H5Pcreate(H5P_DATASET_CREATE), H5Pclose, tmp, "cannot create property list");
      // No modification times in the object headers (h5py's default too): a shard's bytes must not
      // depend on when it was written.
      if (H5Pset_chunk(dcpl.get(), rank, chunk) < 0 || H5Pset_deflate(dcpl.get(), static_cast<unsigned>(level)) < 0 ||
          H5Pset_obj_track_times(dcpl.get(), false) < 0)
        throw_hdf5(tmp, cat("cannot set chunking/gzip for dataset '", col.name, "'"));
      datasets[c] = checked(H5Dcreate2(file.get(), col.name, file_type(col), space.get(), H5P_DEFAULT, dcpl.get(),
                                       H5P_DEFAULT),
                            H5Dclose, tmp, cat("cannot create dataset '", col.name, "'"));
    }
  }

  ~Impl() {
    try {
      workers.wait();
    } catch (...) {  // the writer is being abandoned; its temp file goes with it
    }
  }

  std::unique_ptr<WriteChunk> take_spare() {
    std::unique_ptr<WriteChunk> c;
    if (spare.empty()) {
      c = std::make_unique<WriteChunk>();
      c->data.resize(rows_per_chunk, seq, max_pred, max_pack);
    } else {
      c = std::move(spare.back());
      spare.pop_back();
    }
    c->index = records / rows_per_chunk;
    c->rows = 0;
    return c;
  }

  // Room in the staging chunk; the chunk is queued for compression when full.
  WriteChunk& stage() {
    if (!staging) staging = take_spare();
    return *staging;
  }
  void staged(int64_t n) {
    staging->rows += n;
    records += n;
    if (staging->rows == rows_per_chunk) {
      filled.push_back(std::move(staging));
      if (filled.size() >= generation) rotate();
    }
  }

  // Waits for the chunks being compressed, writes them, and starts compressing the filled ones.
  void rotate() {
    quiet_hdf5();
    if (broken) throw Error(Where{out.path()}, "an earlier write failed; the shard cannot be completed");
    broken = true;
    workers.wait();
    write_chunks(compressing);
    for (auto& c : compressing) spare.push_back(std::move(c));
    compressing.clear();
    std::swap(compressing, filled);
    for (auto& c : compressing)
      for (size_t col = 0; col < columns; ++col)
        workers.run([chunk = c.get(), col, lvl = level] { chunk->deflate(col, lvl); });
    broken = false;
  }

  void set_extent(int64_t rows) {
    for (size_t c = 0; c < columns; ++c) {
      hsize_t dims[2] = {static_cast<hsize_t>(rows),
                         static_cast<hsize_t>(column_width(kColumns[c], seq, max_pred, max_pack))};
      if (H5Dset_extent(datasets[c].get(), dims) < 0)
        throw_hdf5(Where{out.tmp_path()}, cat("cannot extend dataset '", kColumns[c].name, "' to ", rows, " rows"));
    }
    extent = rows;
  }

  void write_chunks(const std::vector<std::unique_ptr<WriteChunk>>& chunks) {
    if (chunks.empty()) return;
    const WriteChunk& last = *chunks.back();
    set_extent(std::max(extent, last.index * rows_per_chunk + last.rows));
    for (const auto& chunk : chunks) {
      hsize_t offset[2] = {static_cast<hsize_t>(chunk->index * rows_per_chunk), 0};
      for (size_t c = 0; c < columns; ++c) {
        // Filter mask 0: the bytes went through every filter of the pipeline (just gzip).
        if (H5Dwrite_chunk(datasets[c].get(), H5P_DEFAULT, 0, offset, chunk->deflated_size[c],
                           chunk->deflated[c].data()) < 0)
          throw_hdf5(Where::at_record(out.tmp_path(), chunk->index * rows_per_chunk),
                     cat("cannot write a chunk of dataset '", kColumns[c].name, "'"));
      }
    }
  }

  void commit() {
    if (committed) throw Error(Where{out.path()}, "shard already committed");
    quiet_hdf5();
    if (staging && staging->rows > 0) {
      // HDF5 stores an edge chunk at full size; its rows past the extent must hold the fill value.
      BertBatch& b = staging->data;
      for (size_t c = 0; c < columns; ++c) {
        size_t row_bytes = static_cast<size_t>(column_width(kColumns[c], seq, max_pred, max_pack)) * kColumns[c].elem;
        uint8_t* base = column_data(b, c);
        std::memset(base + static_cast<size_t>(staging->rows) * row_bytes, 0,
                    static_cast<size_t>(rows_per_chunk - staging->rows) * row_bytes);
      }
      filled.push_back(std::move(staging));
    }
    rotate();  // writes what was compressing, starts the rest
    rotate();  // writes the rest
    set_extent(records);
    for (size_t c = 0; c < columns; ++c)
      if (!datasets[c].close()) throw_hdf5(Where{out.tmp_path()}, "cannot close dataset");
    if (!file.close()) throw_hdf5(Where{out.tmp_path()}, "cannot close HDF5 file");
    out.commit();
    committed = true;
  }

  Where at(int64_t record) const { return Where::at_record(out.path(), record); }

  // A packed row's four fields, values as the datasets may hold them (the row's own consistency
  // is shard-tool verify's job).
  template <typename Small>
  void check_packed(const int32_t* position_ids, const Small* sequence_ids, size_t tokens,
                    const int32_t* positions, const Small* labels, size_t slots, int64_t index) const {
    auto in = [&](const auto* v, size_t n, const char* name, int32_t lo, int32_t hi) {
      for (size_t j = 0; j < n; ++j)
        if (v[j] < lo || v[j] > hi)
          throw Error(at(index), cat(name, "[", j, "] = ", static_cast<int>(v[j]), ", expected a value in [", lo, ", ", hi, "]"));
    };
    const auto last = static_cast<int32_t>(seq - 1);
    in(position_ids, tokens, "position_ids", 0, last);
    in(sequence_ids, tokens, "sequence_ids", 0, static_cast<int32_t>(max_pack));
    in(positions, slots, "next_sentence_positions", 0, last);
    in(labels, slots, "packed_next_sentence_labels", -1, 1);
  }
};

BertShardWriter::BertShardWriter(const std::string& path, int64_t seq_len, int64_t max_predictions,
                                 const BertShardOptions& options)
    : impl_(std::make_unique<Impl>(path, seq_len, max_predictions, options)) {}

BertShardWriter::~BertShardWriter() = default;

int64_t BertShardWriter::size() const { return impl_->records; }
const std::string& BertShardWriter::path() const { return impl_->out.path(); }
void BertShardWriter::commit() { impl_->commit(); }

void BertShardWriter::append(const BertRecord& r) {
  Impl& s = *impl_;
  if (s.committed) throw Error(Where{s.out.path()}, "append after commit");
  const int64_t index = s.records;
  const size_t tokens = r.input_ids.size(), preds = r.masked_lm_positions.size();
  if (tokens > static_cast<size_t>(s.seq) || r.input_mask.size() != tokens || r.segment_ids.size() != tokens)
    throw Error(s.at(index), cat("expected input_ids, input_mask, segment_ids of one length <= seq_len ", s.seq,
                                 ", found ", tokens, ", ", r.input_mask.size(), ", ", r.segment_ids.size()));
  if (preds > static_cast<size_t>(s.max_pred) || r.masked_lm_ids.size() != preds)
    throw Error(s.at(index), cat("expected masked_lm_positions and masked_lm_ids of one length <= max_predictions ",
                                 s.max_pred, ", found ", preds, " and ", r.masked_lm_ids.size()));
  auto fits_int8 = [&](const std::vector<int32_t>& v, const char* name) {
    for (size_t j = 0; j < v.size(); ++j)
      if (v[j] < -128 || v[j] > 127) throw Error(s.at(index), cat(name, "[", j, "] = ", v[j], " does not fit int8"));
  };
  fits_int8(r.input_mask, "input_mask");
  fits_int8(r.segment_ids, "segment_ids");
  if (r.next_sentence_label < -128 || r.next_sentence_label > 127)
    throw Error(s.at(index), cat("next_sentence_label = ", r.next_sentence_label, " does not fit int8"));
  for (size_t k = 0; k < preds; ++k)
    if (r.masked_lm_positions[k] < 0 || r.masked_lm_positions[k] >= s.seq)
      throw Error(s.at(index), cat("masked_lm_positions[", k, "] = ", r.masked_lm_positions[k],
                                   ", expected a position in [0, ", s.seq, ")"));
  const size_t slots = r.next_sentence_positions.size();
  if (s.max_pack == 0) {
    if (!r.position_ids.empty() || !r.sequence_ids.empty() || slots || !r.packed_next_sentence_labels.empty())
      throw Error(s.at(index), "record has packed fields, expected none (the shard is not packed: max_pack 0)");
  } else {
    if (r.position_ids.size() != tokens || r.sequence_ids.size() != tokens)
      throw Error(s.at(index), cat("expected position_ids and sequence_ids as long as input_ids (", tokens, "), found ",
                                   r.position_ids.size(), " and ", r.sequence_ids.size()));
    if (slots > static_cast<size_t>(s.max_pack) || r.packed_next_sentence_labels.size() != slots)
      throw Error(s.at(index), cat("expected next_sentence_positions and packed_next_sentence_labels of one length <= "
                                   "max_pack ", s.max_pack, ", found ", slots, " and ",
                                   r.packed_next_sentence_labels.size()));
    s.check_packed(r.position_ids.data(), r.sequence_ids.data(), tokens, r.next_sentence_positions.data(),
                   r.packed_next_sentence_labels.data(), slots, index);
  }
  WriteChunk& chunk = s.stage();
  chunk.data.set(chunk.rows, r);
  s.staged(1);
}

void BertShardWriter::append(const BertBatch& b) {
  Impl& s = *impl_;
  if (s.committed) throw Error(Where{s.out.path()}, "append after commit");
  if (b.seq_len != s.seq || b.max_predictions != s.max_pred)
    throw Error(Where{s.out.path()}, cat("batch has seq_len ", b.seq_len, " and max_predictions ", b.max_predictions,
                                         ", expected ", s.seq, " and ", s.max_pred));
  const auto n = static_cast<size_t>(b.size);
  const auto ns = n * static_cast<size_t>(s.seq), np = n * static_cast<size_t>(s.max_pred);
  if (b.size < 0 || b.input_ids.size() != ns || b.input_mask.size() != ns || b.segment_ids.size() != ns ||
      b.masked_lm_positions.size() != np || b.masked_lm_ids.size() != np || b.next_sentence_labels.size() != n)
    throw Error(Where{s.out.path()}, cat("batch of ", b.size, " records has arrays of the wrong size"));
  const auto nk = n * static_cast<size_t>(s.max_pack);
  if (b.max_pack != s.max_pack || b.position_ids.size() != (s.max_pack ? ns : 0) ||
      b.sequence_ids.size() != (s.max_pack ? ns : 0) || b.next_sentence_positions.size() != nk ||
      b.packed_next_sentence_labels.size() != nk)
    throw Error(Where{s.out.path()}, cat("batch has max_pack ", b.max_pack, " (or packed arrays of the wrong size), expected ",
                                         s.max_pack));
  for (size_t i = 0; s.max_pack > 0 && i < n; ++i) {
    const size_t t = i * static_cast<size_t>(s.seq), k = i * static_cast<size_t>(s.max_pack);
    s.check_packed(b.position_ids.data() + t, b.sequence_ids.data() + t, static_cast<size_t>(s.seq),
                   b.next_sentence_positions.data() + k, b.packed_next_sentence_labels.data() + k,
                   static_cast<size_t>(s.max_pack), s.records + static_cast<int64_t>(i));
  }
  for (size_t i = 0; i < np; ++i)
    if (b.masked_lm_positions[i] < 0 || b.masked_lm_positions[i] >= s.seq)
      throw Error(s.at(s.records + static_cast<int64_t>(i) / std::max<int64_t>(1, s.max_pred)),
                  cat("masked_lm_positions[", static_cast<int64_t>(i) % s.max_pred, "] = ", b.masked_lm_positions[i],
                      ", expected a position in [0, ", s.seq, ")"));
  for (int64_t done = 0; done < b.size;) {
    WriteChunk& chunk = s.stage();
    int64_t take = std::min(b.size - done, s.rows_per_chunk - chunk.rows);
    for (size_t c = 0; c < s.columns; ++c) {
      auto row_bytes = static_cast<size_t>(column_width(kColumns[c], s.seq, s.max_pred, s.max_pack)) * kColumns[c].elem;
      std::memcpy(column_data(chunk.data, c) + static_cast<size_t>(chunk.rows) * row_bytes,
                  column_data(b, c) + static_cast<size_t>(done) * row_bytes, static_cast<size_t>(take) * row_bytes);
    }
    done += take;
    s.staged(take);
  }
}

}  // namespace pretrain
