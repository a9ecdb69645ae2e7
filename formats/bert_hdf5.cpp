// NVIDIA BERT HDF5 shards: streaming writer with parallel deflate + direct chunk writes, and a
// reader that inflates raw chunks itself (hyperslab reads through HDF5 for any other layout).
#include "formats/bert_hdf5.h"

#include <hdf5.h>
#include <tbb/parallel_for.h>
#include <tbb/task_group.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cstring>
#include <limits>
#include <ostream>

#include "common/cli.h"
#include "common/error.h"
#include "common/file.h"

namespace pretrain {

static_assert(std::endian::native == std::endian::little,
              "the raw-chunk paths copy little-endian file bytes straight into memory");

// ---------------------------------------------------------------------------------------------
// The six datasets, in NVIDIA's creation order.

namespace {

enum class Width { seq, predictions, one };

struct Column {
  const char* name;
  size_t elem;  // bytes per element in memory (and in our files): 4 = int32, 1 = int8
  Width width;
};

constexpr std::array<Column, 6> kColumns = {{
    {"input_ids", 4, Width::seq},
    {"input_mask", 1, Width::seq},
    {"segment_ids", 1, Width::seq},
    {"masked_lm_positions", 4, Width::predictions},
    {"masked_lm_ids", 4, Width::predictions},
    {"next_sentence_labels", 1, Width::one},
}};
constexpr size_t kPositions = 3;

int64_t column_width(const Column& c, int64_t seq, int64_t max_pred) {
  return c.width == Width::seq ? seq : c.width == Width::predictions ? max_pred : 1;
}

uint8_t* column_data(BertBatch& b, size_t i) {
  switch (i) {
    case 0: return reinterpret_cast<uint8_t*>(b.input_ids.data());
    case 1: return reinterpret_cast<uint8_t*>(b.input_mask.data());
    case 2: return reinterpret_cast<uint8_t*>(b.segment_ids.data());
    case 3: return reinterpret_cast<uint8_t*>(b.masked_lm_positions.data());
    case 4: return reinterpret_cast<uint8_t*>(b.masked_lm_ids.data());
    default: return reinterpret_cast<uint8_t*>(b.next_sentence_labels.data());
  }
}
const uint8_t* column_data(const BertBatch& b, size_t i) { return column_data(const_cast<BertBatch&>(b), i); }

hid_t file_type(const Column& c) { return c.elem == 4 ? H5T_STD_I32LE : H5T_STD_I8LE; }
hid_t memory_type(const Column& c) { return c.elem == 4 ? H5T_NATIVE_INT32 : H5T_NATIVE_INT8; }

// ---------------------------------------------------------------------------------------------
// HDF5 plumbing: no stack printing, its messages folded into our errors, ids closed by RAII.

// HDF5's thread-safe build keeps the error stack, and whether it auto-prints, per thread.
void quiet_hdf5() {
  thread_local bool quiet = false;
  if (!quiet) {
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
    quiet = true;
  }
}

herr_t collect_error(unsigned, const H5E_error2_t* e, void* data) {
  auto* messages = static_cast<std::vector<std::string>*>(data);
  std::string desc = e->desc && *e->desc ? e->desc : (e->func_name ? e->func_name : "?");
  if (messages->empty() || messages->back() != desc) messages->push_back(desc);
  return 0;
}

// The innermost (most specific) messages of the current thread's HDF5 error stack; clears it.
std::string take_hdf5_errors() {
  std::vector<std::string> messages;
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_DOWNWARD, collect_error, &messages);
  H5Eclear2(H5E_DEFAULT);
  if (messages.empty()) return "HDF5 reported no detail";
  std::string text = "HDF5: ";
  size_t first = messages.size() > 3 ? messages.size() - 3 : 0;
  for (size_t i = messages.size(); i-- > first;) text += messages[i] + (i > first ? "; " : "");
  return text;
}

[[noreturn]] void throw_hdf5(const Where& where, const std::string& what) {
  throw Error(where, cat(what, " (", take_hdf5_errors(), ")"));
}

class Hid {
 public:
  using Closer = herr_t (*)(hid_t);
  Hid() = default;
  Hid(hid_t id, Closer close) : id_(id), close_(close) {}
  Hid(Hid&& o) noexcept : id_(o.id_), close_(o.close_) { o.id_ = -1; }
  Hid& operator=(Hid&& o) noexcept {
    if (this != &o) reset(), id_ = o.id_, close_ = o.close_, o.id_ = -1;
    return *this;
  }
  ~Hid() { reset(); }
  hid_t get() const { return id_; }
  bool valid() const { return id_ >= 0; }
  // Closes now and reports failure (a file close flushes metadata and can fail).
  bool close() {
    herr_t rc = id_ >= 0 ? close_(id_) : 0;
    id_ = -1;
    return rc >= 0;
  }

 private:
  void reset() {
    if (id_ >= 0) close_(id_);
    id_ = -1;
  }
  hid_t id_ = -1;
  Closer close_ = nullptr;
};

// Reads a chunk's stored bytes at the address and size the chunk index gives, bounded by the
// file's size. Not H5Dread_chunk: libhdf5 1.10 reads an unfiltered chunk at the size its layout
// message states, which a damaged file can set apart from the index's size that sized our buffer
// (ASan: heap-buffer-overflow in pread under H5Dread_chunk), and it follows an address past the
// end of the file.
class ChunkFile {
 public:
  ChunkFile() = default;
  ChunkFile(const std::string& path, hid_t file) : path_(path) {
    fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd_ < 0) throw_errno("cannot open", path);
    struct stat st {};
    if (::fstat(fd_, &st) != 0) throw_errno("cannot stat", path);
    size_ = static_cast<uint64_t>(st.st_size);
    // Chunk addresses count from the superblock, which follows the user block when there is one.
    Hid fcpl(H5Fget_create_plist(file), H5Pclose);
    hsize_t userblock = 0;
    if (!fcpl.valid() || H5Pget_userblock(fcpl.get(), &userblock) < 0) throw_hdf5(Where{path}, "cannot read the user block size");
    base_ = userblock;
  }
  ChunkFile(const ChunkFile&) = delete;
  ChunkFile& operator=(ChunkFile&& o) noexcept {
    std::swap(fd_, o.fd_), std::swap(path_, o.path_), std::swap(size_, o.size_), std::swap(base_, o.base_);
    return *this;
  }
  ~ChunkFile() {
    if (fd_ >= 0) ::close(fd_);
  }

  struct Stored {
    uint64_t size = 0;  // 0: never written (all fill value)
    uint32_t skipped_filters = 0;
    haddr_t addr = HADDR_UNDEF;
  };

  // Where the chunk at `offset` of dataset `set` lies, at most `limit` stored bytes for a chunk of
  // `chunk_bytes`; `what` names it for errors.
  Stored locate(hid_t set, const hsize_t* offset, uint64_t limit, size_t chunk_bytes, const Where& where,
                const std::string& what) const {
    Stored s;
    hsize_t size = 0;
    if (H5Dget_chunk_info_by_coord(set, offset, &s.skipped_filters, &s.addr, &size) < 0) throw_hdf5(where, "cannot locate " + what);
    s.size = size;
    if (s.size == 0) return s;
    if (s.size > limit)
      throw Error(where, cat(what, " claims ", s.size, " stored bytes, expected at most ", limit, " for a ", chunk_bytes,
                             "-byte chunk"));
    uint64_t end = 0;
    if (s.addr == HADDR_UNDEF || __builtin_add_overflow(base_, s.addr, &end) || __builtin_add_overflow(end, s.size, &end) ||
        end > size_)
      throw Error(where, cat(what, " claims ", s.size, " bytes at address ", s.addr, ", past the end of the ", size_,
                             "-byte file"));
    return s;
  }

  void read(const Stored& s, uint8_t* out, const Where& where, const std::string& what) const {
    uint64_t done = 0;
    while (done < s.size) {
      ssize_t got = ::pread(fd_, out + done, static_cast<size_t>(s.size - done), static_cast<off_t>(base_ + s.addr + done));
      if (got < 0 && errno == EINTR) continue;
      if (got < 0) throw_errno("cannot read " + what, path_);
      if (got == 0) throw Error(where, cat(what, ": file ends ", done, " bytes into its ", s.size, " stored bytes"));
      done += static_cast<uint64_t>(got);
    }
  }

 private:
  std::string path_;
  int fd_ = -1;
  uint64_t size_ = 0, base_ = 0;
};

Hid checked(hid_t id, Hid::Closer close, const Where& where, const std::string& what) {
  if (id < 0) throw_hdf5(where, what);
  return Hid(id, close);
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// BertBatch

void BertBatch::resize(int64_t n, int64_t seq, int64_t max_pred) {
  auto elements = [](int64_t a, int64_t b) {
    int64_t r;
    if (a < 0 || b < 0 || __builtin_mul_overflow(a, b, &r)) throw Error(cat("BertBatch of ", a, " x ", b, " is too large"));
    return static_cast<size_t>(r);
  };
  size = n, seq_len = seq, max_predictions = max_pred;
  input_ids.resize(elements(n, seq));
  input_mask.resize(elements(n, seq));
  segment_ids.resize(elements(n, seq));
  masked_lm_positions.resize(elements(n, max_pred));
  masked_lm_ids.resize(elements(n, max_pred));
  next_sentence_labels.resize(elements(n, 1));
}

BertRecord BertBatch::record(int64_t i) const {
  BertRecord r;
  auto row = [i](const auto& v, int64_t w) {
    auto first = v.begin() + i * w;
    return std::vector<int32_t>(first, first + w);
  };
  r.input_ids = row(input_ids, seq_len);
  r.input_mask = row(input_mask, seq_len);
  r.segment_ids = row(segment_ids, seq_len);
  r.masked_lm_positions = row(masked_lm_positions, max_predictions);
  r.masked_lm_ids = row(masked_lm_ids, max_predictions);
  r.next_sentence_label = next_sentence_labels[static_cast<size_t>(i)];
  return r;
}

void BertBatch::set(int64_t i, const BertRecord& r) {
  auto put = [i](auto& v, int64_t w, const std::vector<int32_t>& src) {
    using T = typename std::decay_t<decltype(v)>::value_type;
    auto* row = v.data() + i * w;
    int64_t n = std::min<int64_t>(w, static_cast<int64_t>(src.size()));
    for (int64_t j = 0; j < n; ++j) row[j] = static_cast<T>(src[static_cast<size_t>(j)]);
    std::fill(row + n, row + w, T{0});
  };
  put(input_ids, seq_len, r.input_ids);
  put(input_mask, seq_len, r.input_mask);
  put(segment_ids, seq_len, r.segment_ids);
  put(masked_lm_positions, max_predictions, r.masked_lm_positions);
  put(masked_lm_ids, max_predictions, r.masked_lm_ids);
  next_sentence_labels[static_cast<size_t>(i)] = static_cast<int8_t>(r.next_sentence_label);
}

// ---------------------------------------------------------------------------------------------
// Writer

namespace {

// Default chunk: ~256 KiB of input_ids (512 records at seq_len 128). Big enough that deflate
// reaches its full ratio (its window is 32 KiB) and HDF5's per-chunk cost (a B-tree entry, six
// direct writes) is noise; small enough that a random single-record read inflates little, that
// the writer's in-flight memory stays a few MB, and that a 1M-record shard still splits into
// ~2000 chunks for parallel inflation.
constexpr int64_t kTargetChunkBytes = 256 << 10;

// zlib-format deflate (what HDF5's gzip filter writes) with one stream per worker thread, reset
// between chunks instead of allocating its ~300 KiB of state for every chunk.
size_t deflate_chunk(const uint8_t* src, size_t bytes, int level, std::vector<uint8_t>& out) {
  struct Stream {
    z_stream zs{};
    int level = -1;
    ~Stream() {
      if (level >= 0) deflateEnd(&zs);
    }
  };
  thread_local Stream s;
  if (s.level != level) {
    if (s.level >= 0) deflateEnd(&s.zs);
    s.zs = z_stream{};
    s.level = -1;
    if (deflateInit(&s.zs, level) != Z_OK) throw Error(cat("zlib deflateInit failed at level ", level));
    s.level = level;
  } else {
    deflateReset(&s.zs);
  }
  size_t bound = deflateBound(&s.zs, static_cast<uLong>(bytes));
  if (out.size() < bound) out.resize(bound);  // grows once; later chunks reuse it
  s.zs.next_in = const_cast<uint8_t*>(src);
  s.zs.avail_in = static_cast<uInt>(bytes);
  s.zs.next_out = out.data();
  s.zs.avail_out = static_cast<uInt>(out.size());
  int rc = deflate(&s.zs, Z_FINISH);
  if (rc != Z_STREAM_END) throw Error(cat("zlib deflate failed (", rc, ")"));
  return static_cast<size_t>(s.zs.total_out);
}

// One row-block: R whole records for every dataset, then each dataset's deflated bytes.
struct WriteChunk {
  int64_t index = 0;  // chunk row index: records [index*R, index*R + rows)
  int64_t rows = 0;
  BertBatch data;  // always R rows; rows past `rows` are zero (the fill value)
  std::array<std::vector<uint8_t>, 6> deflated;  // capacity reused; valid up to deflated_size
  std::array<size_t, 6> deflated_size{};

  void deflate(size_t column, int level) {
    auto bytes = static_cast<size_t>(column_width(kColumns[column], data.seq_len, data.max_predictions) * data.size) *
                 kColumns[column].elem;
    deflated_size[column] = deflate_chunk(column_data(data, column), bytes, level, deflated[column]);
  }
};

}  // namespace

struct BertShardWriter::Impl {
  AtomicFile out;
  int64_t seq, max_pred, rows_per_chunk;
  int level;
  size_t generation;  // chunks compressed together
  Hid file;
  std::array<Hid, 6> datasets;
  int64_t records = 0;
  int64_t extent = 0;  // rows the datasets currently hold
  bool committed = false;
  bool broken = false;  // a chunk failed to compress or write: the file is incomplete

  std::unique_ptr<WriteChunk> staging;  // being filled by append
  std::vector<std::unique_ptr<WriteChunk>> filled, compressing, spare;
  tbb::task_group workers;

  Impl(const std::string& path, int64_t seq_len, int64_t max_predictions, const BertShardOptions& o)
      : out(path, /*open_fd=*/false), seq(seq_len), max_pred(max_predictions), level(o.gzip_level) {
    Where where{path};
    if (seq < 1 || seq > (1 << 24)) throw UsageError(where, cat("seq_len ", seq, " must be in [1, 2^24]"));
    if (max_pred < 0 || max_pred > (1 << 24))
      throw UsageError(where, cat("max_predictions ", max_pred, " must be in [0, 2^24]"));
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
    for (size_t c = 0; c < kColumns.size(); ++c) {
      const Column& col = kColumns[c];
      int rank = col.width == Width::one ? 1 : 2;
      hsize_t dims[2] = {0, static_cast<hsize_t>(column_width(col, seq, max_pred))};
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
      c->data.resize(rows_per_chunk, seq, max_pred);
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
      for (size_t col = 0; col < kColumns.size(); ++col)
        workers.run([chunk = c.get(), col, lvl = level] { chunk->deflate(col, lvl); });
    broken = false;
  }

  void set_extent(int64_t rows) {
    for (size_t c = 0; c < kColumns.size(); ++c) {
      hsize_t dims[2] = {static_cast<hsize_t>(rows), static_cast<hsize_t>(column_width(kColumns[c], seq, max_pred))};
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
      for (size_t c = 0; c < kColumns.size(); ++c) {
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
      for (size_t c = 0; c < kColumns.size(); ++c) {
        size_t row_bytes = static_cast<size_t>(column_width(kColumns[c], seq, max_pred)) * kColumns[c].elem;
        uint8_t* base = column_data(b, c);
        std::memset(base + static_cast<size_t>(staging->rows) * row_bytes, 0,
                    static_cast<size_t>(rows_per_chunk - staging->rows) * row_bytes);
      }
      filled.push_back(std::move(staging));
    }
    rotate();  // writes what was compressing, starts the rest
    rotate();  // writes the rest
    set_extent(records);
    for (auto& d : datasets)
      if (!d.close()) throw_hdf5(Where{out.tmp_path()}, "cannot close dataset");
    if (!file.close()) throw_hdf5(Where{out.tmp_path()}, "cannot close HDF5 file");
    out.commit();
    committed = true;
  }

  Where at(int64_t record) const { return Where::at_record(out.path(), record); }
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
  for (size_t i = 0; i < np; ++i)
    if (b.masked_lm_positions[i] < 0 || b.masked_lm_positions[i] >= s.seq)
      throw Error(s.at(s.records + static_cast<int64_t>(i) / std::max<int64_t>(1, s.max_pred)),
                  cat("masked_lm_positions[", static_cast<int64_t>(i) % s.max_pred, "] = ", b.masked_lm_positions[i],
                      ", expected a position in [0, ", s.seq, ")"));
  for (int64_t done = 0; done < b.size;) {
    WriteChunk& chunk = s.stage();
    int64_t take = std::min(b.size - done, s.rows_per_chunk - chunk.rows);
    for (size_t c = 0; c < kColumns.size(); ++c) {
      auto row_bytes = static_cast<size_t>(column_width(kColumns[c], s.seq, s.max_pred)) * kColumns[c].elem;
      std::memcpy(column_data(chunk.data, c) + static_cast<size_t>(chunk.rows) * row_bytes,
                  column_data(b, c) + static_cast<size_t>(done) * row_bytes, static_cast<size_t>(take) * row_bytes);
    }
    done += take;
    s.staged(take);
  }
}

// ---------------------------------------------------------------------------------------------
// Reader

namespace {

// HDF5 clamps out-of-range values during conversion unless told otherwise; we fail instead.
H5T_conv_ret_t refuse_overflow(H5T_conv_except_t kind, hid_t, hid_t, void*, void*, void*) {
  return kind == H5T_CONV_EXCEPT_RANGE_HI || kind == H5T_CONV_EXCEPT_RANGE_LOW ? H5T_CONV_ABORT
                                                                               : H5T_CONV_UNHANDLED;
}

// One raw chunk, inflated lazily: a read of the first rows only inflates the prefix it needs,
// and a later read of rows further down continues the same zlib stream.
struct RawChunk {
  int64_t row_chunk = -1;
  // Left uninitialised: every byte is overwritten before it is read.
  std::unique_ptr<uint8_t[]> stored, data;  // bytes as stored in the file; the decoded chunk
  size_t stored_size = 0, data_size = 0;
  size_t decoded = 0;  // data[0, decoded) is valid
  bool deflated = true;
  bool stream_open = false;
  z_stream zs{};

  RawChunk() = default;
  RawChunk(const RawChunk&) = delete;
  ~RawChunk() {
    if (stream_open) inflateEnd(&zs);
  }

  // Makes data[0, prefix) valid. `what` names the chunk for errors.
  void ensure(size_t prefix, const std::string& file, const std::string& what) {
    if (decoded >= prefix) return;
    if (!deflated) {
      if (stored_size != data_size)
        throw Error(Where{file}, cat(what, ": unfiltered chunk has ", stored_size, " bytes, expected ", data_size));
      std::memcpy(data.get(), stored.get(), data_size);
      decoded = data_size;
      return;
    }
    if (!stream_open) {
      if (inflateInit(&zs) != Z_OK) throw Error(Where{file}, cat(what, ": zlib inflateInit failed"));
      stream_open = true;
      zs.next_in = stored.get();
      zs.avail_in = static_cast<uInt>(stored_size);
    }
    zs.next_out = data.get() + decoded;
    zs.avail_out = static_cast<uInt>(prefix - decoded);
    int rc = inflate(&zs, Z_SYNC_FLUSH);
    decoded = static_cast<size_t>(zs.next_out - data.get());
    if (rc == Z_STREAM_END ? decoded != data_size : (rc != Z_OK && rc != Z_BUF_ERROR) || decoded < prefix)
      throw Error(Where{file}, cat(what, ": corrupt or truncated gzip data (zlib ", rc, zs.msg ? cat(": ", zs.msg) : "",
                                   ") after ", decoded, " of ", data_size, " bytes"));
  }
};

struct Dataset {
  const Column* column = nullptr;
  Hid id;
  int64_t width = 1;         // elements per record
  bool raw = false;          // read through raw chunks
  int64_t chunk_rows = 0, chunk_cols = 1;
  size_t chunk_bytes = 0;    // decoded size of one chunk
  bool deflate = false;      // the pipeline is [gzip] rather than empty
  std::vector<std::shared_ptr<RawChunk>> cache;  // last chunk read, per column of chunks
  // Hyperslab path, chunked: libhdf5 1.10 trusts a filter's output to fill the chunk and reads
  // past a shorter buffer (ASan: heap-buffer-overflow in H5VM_memcpyvv on a damaged chunk shape),
  // so every chunk is checked once, before HDF5 reads it, to decode to exactly the chunk's size.
  bool slab_chunked = false;
  hsize_t slab_chunk[2] = {0, 1};
  size_t slab_chunk_bytes = 0;   // as stored (the file's element size, not ours)
  std::vector<bool> slab_checked;  // per chunk, row-major over (row chunk, column chunk)
};

std::string numpy_dtype(hid_t type) {
  if (H5Tget_class(type) != H5T_INTEGER) return cat("class ", static_cast<int>(H5Tget_class(type)));
  size_t size = H5Tget_size(type);
  char order = size == 1 ? '|' : H5Tget_order(type) == H5T_ORDER_BE ? '>' : '<';
  char kind = H5Tget_sign(type) == H5T_SGN_NONE ? 'u' : 'i';
  return cat(order, kind, size);
}

// Validates the signature before handing the file to libhdf5, which trusts more than it should.
void check_hdf5_signature(const std::string& path) {
  static const uint8_t kSignature[8] = {0x89, 'H', 'D', 'F', '\r', '\n', 0x1a, '\n'};
  MappedFile map(path);
  // The superblock is at 0 or, after a user block, at 512, 1024, 2048, …
  for (size_t at = 0; at + 8 <= map.size(); at = at ? at * 2 : 512)
    if (std::memcmp(map.data() + at, kSignature, 8) == 0) return;
  throw Error(Where::at_offset(path, 0), cat("not an HDF5 file: no HDF5 signature at byte 0 or 512·2^k (file is ",
                                             map.size(), " bytes)"));
}


// libhdf5 1.10 divides by the chunk dimensions of a layout message while it opens a dataset
// (H5D__chunk_set_info), so a chunk dimension of 0 in a damaged file kills the process with SIGFPE
// inside H5Dopen2, before any of our checks could run (found by fuzzing). So before opening a
// dataset we read its object header ourselves (the first header chunk: where HDF5 puts the
// layout message) and refuse a chunked layout with a zero dimension. Continuation chunks are not
// followed; this is a guard against one known crash, not a second HDF5 parser.
void check_layout_dims(const std::string& path, const MappedFile& map, hid_t file, const char* name) {
  H5O_info_t info{};
  if (H5Oget_info_by_name2(file, name, &info, H5O_INFO_BASIC | H5O_INFO_HDR, H5P_DEFAULT) < 0) return;  // H5Dopen2 reports it
  const uint8_t* base = map.data();
  uint64_t size = map.size(), at = info.addr;
  if (at == HADDR_UNDEF || at >= size) return;
  auto u16 = [&](uint64_t o) { return static_cast<uint32_t>(base[o] | base[o + 1] << 8); };
  auto u32 = [&](uint64_t o) { uint32_t v; std::memcpy(&v, base + o, 4); return v; };
  auto check_layout = [&](uint64_t data, uint64_t len) {
    if (len < 3 || data + len > size) return;
    const uint8_t* m = base + data;
    uint64_t dims_at = 0, ndims = 0, width = 4;
    if ((m[0] == 1 || m[0] == 2) && m[2] == 2) {  // v1/v2: version, rank+1, class, 5 reserved, address
      ndims = m[1], dims_at = 8 + 8;
    } else if (m[0] == 3 && m[1] == 2 && len >= 3) {  // v3: version, class, rank+1, address
      ndims = m[2], dims_at = 3 + 8;
    } else if (m[0] == 4 && m[1] == 2 && len >= 5) {  // v4: version, class, flags, rank+1, width
      ndims = m[3], width = m[4], dims_at = 5;
    } else {
      return;
    }
    if (width < 1 || width > 8) return;
    for (uint64_t d = 0; d < ndims && dims_at + (d + 1) * width <= len; ++d) {
      uint64_t v = 0;
      std::memcpy(&v, m + dims_at + d * width, width);
      if (v == 0)
        throw Error(Where::at_offset(path, static_cast<int64_t>(data)),
                    cat("dataset '", name, "' has a chunk dimension of 0 in its layout message: the file is damaged"));
    }
  };
  if (info.hdr.version == 1 && at + 16 <= size) {  // prefix: version, 0, nmesgs, refcount, header size, pad
    uint64_t end = std::min<uint64_t>(size, at + 16 + u32(at + 8));
    for (uint64_t o = at + 16; o + 8 <= end;) {
      uint32_t type = u16(o), len = u16(o + 2);
      if (type == 8) check_layout(o + 8, std::min<uint64_t>(len, end - (o + 8)));
      o += 8 + len;
    }
  } else if (info.hdr.version == 2 && at + 6 <= size && std::memcmp(base + at, "OHDR", 4) == 0) {
    uint8_t flags = base[at + 5];
    uint64_t o = at + 6 + ((flags & 0x20) ? 16 : 0) + ((flags & 0x10) ? 4 : 0);
    uint64_t width = uint64_t{1} << (flags & 3);
    if (o + width > size) return;
    uint64_t chunk0 = 0;
    std::memcpy(&chunk0, base + o, width);
    o += width;
    uint64_t end = std::min<uint64_t>(size, o + std::min<uint64_t>(chunk0, size));
    uint64_t msg_header = (flags & 0x04) ? 6 : 4;
    for (; o + msg_header <= end;) {
      uint32_t type = base[o], len = u16(o + 1);
      if (type == 8) check_layout(o + msg_header, std::min<uint64_t>(len, end - (o + msg_header)));
      o += msg_header + len;
    }
  }
}
}  // namespace

struct BertShardReader::Impl {
  std::string path;
  Hid file, dxpl;
  ChunkFile chunk_file;
  std::array<Dataset, 6> sets;
  int64_t records = 0, seq = 0, max_pred = 0;
  BertBatch one;  // scratch for read()

  Impl(const std::string& p, BertReadPath read_path) : path(p) {
    quiet_hdf5();
    check_hdf5_signature(path);
    Where where{path};
    file = checked(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose, where, "cannot open as HDF5");
    chunk_file = ChunkFile(path, file.get());
    dxpl = checked(H5Pcreate(H5P_DATASET_XFER), H5Pclose, where, "cannot create transfer property list");
    if (H5Pset_type_conv_cb(dxpl.get(), refuse_overflow, nullptr) < 0) throw_hdf5(where, "cannot set conversion callback");

    std::array<std::array<hsize_t, 2>, 6> dims{};
    for (size_t c = 0; c < kColumns.size(); ++c) dims[c] = open_dataset(c);
    records = static_cast<int64_t>(dims[0][0]);
    seq = static_cast<int64_t>(dims[0][1]);
    max_pred = static_cast<int64_t>(dims[kPositions][1]);
    if (seq < 1) throw Error(where, "dataset 'input_ids' has seq_len 0, expected at least 1");
    for (size_t c = 0; c < kColumns.size(); ++c) {
      int64_t w = column_width(kColumns[c], seq, max_pred);
      bool rank2 = kColumns[c].width != Width::one;
      if (static_cast<int64_t>(dims[c][0]) != records || (rank2 && static_cast<int64_t>(dims[c][1]) != w))
        throw Error(where, cat("dataset '", kColumns[c].name, "' has shape [", dims[c][0], rank2 ? cat(", ", dims[c][1]) : "",
                               "], expected [", records, rank2 ? cat(", ", w) : "",
                               "] (N from input_ids, seq_len from input_ids, max_predictions from masked_lm_positions)"));
      sets[c].width = w;
    }
    if (read_path == BertReadPath::automatic)
      for (auto& d : sets) d.raw = raw_layout(d);
    for (auto& d : sets)
      if (!d.raw) prepare_slab_checks(d);
  }

  // The filters the hyperslab path accepts are the size-preserving ones HDF5 builds in (gzip,
  // shuffle, fletcher32); a chunked dataset gets a table of chunks still to check.
  void prepare_slab_checks(Dataset& d) {
    Where where{path};
    Hid dcpl = checked(H5Dget_create_plist(d.id.get()), H5Pclose, where, "cannot read dataset properties");
    Hid type = checked(H5Dget_type(d.id.get()), H5Tclose, where, "cannot read the dataset type");
    int filters = H5Pget_nfilters(dcpl.get());
    for (int i = 0; i < filters; ++i) {
      unsigned flags = 0, values[8];
      size_t nvalues = 8;
      H5Z_filter_t f = H5Pget_filter2(dcpl.get(), static_cast<unsigned>(i), &flags, &nvalues, values, 0, nullptr, nullptr);
      if (f != H5Z_FILTER_DEFLATE && f != H5Z_FILTER_SHUFFLE && f != H5Z_FILTER_FLETCHER32)
        throw Error(where, cat("dataset '", d.column->name, "' uses HDF5 filter ", f,
                               ": expected gzip, shuffle or fletcher32 (what h5py and NVIDIA's script write)"));
    }
    if (H5Pget_layout(dcpl.get()) != H5D_CHUNKED) return;
    int rank = d.column->width == Width::one ? 1 : 2;
    if (H5Pget_chunk(dcpl.get(), rank, d.slab_chunk) != rank) throw_hdf5(where, "cannot read the chunk shape");
    uint64_t cells = d.slab_chunk[0] * (rank == 2 ? d.slab_chunk[1] : 1);
    d.slab_chunk_bytes = static_cast<size_t>(cells * H5Tget_size(type.get()));  // < 4 GiB: check_chunk_shape
    if (filters == 0) {
      // Unfiltered chunks are stored at full size, so the dataset's storage is a whole number of
      // them. libhdf5 1.10 sizes its chunk buffer from a layout field a damaged file can set apart
      // from the type and copies past it (ASan: heap-buffer-overflow in H5VM_memcpyvv under
      // H5D__select_read); such files fail this sum first.
      hsize_t chunks = 0;
      Hid space = checked(H5Dget_space(d.id.get()), H5Sclose, where, "cannot read the dataspace");
      if (H5Dget_num_chunks(d.id.get(), space.get(), &chunks) < 0) throw_hdf5(where, cat("cannot count the chunks of '", d.column->name, "'"));
      const hsize_t stored = H5Dget_storage_size(d.id.get());
      if (stored != chunks * d.slab_chunk_bytes)
        throw Error(where, cat("dataset '", d.column->name, "' stores ", stored, " bytes in ", chunks, " unfiltered chunks of ",
                               d.slab_chunk_bytes, " bytes"));
    }
    uint64_t row_chunks = (static_cast<uint64_t>(records) + d.slab_chunk[0] - 1) / d.slab_chunk[0];
    uint64_t col_chunks = rank == 2 ? (static_cast<uint64_t>(d.width) + d.slab_chunk[1] - 1) / d.slab_chunk[1] : 1;
    d.slab_checked.assign(static_cast<size_t>(row_chunks * col_chunks), false);
    d.slab_chunked = true;
  }

  // Checks the chunks that records [begin, begin+count) of d lie in (each once per reader).
  void check_slab_chunks(Dataset& d, int64_t begin, int64_t count) {
    if (!d.slab_chunked || count == 0) return;
    const uint64_t rows = d.slab_chunk[0];
    const uint64_t col_chunks = d.column->width == Width::one ? 1 : (static_cast<uint64_t>(d.width) + d.slab_chunk[1] - 1) / d.slab_chunk[1];
    for (uint64_t rc = static_cast<uint64_t>(begin) / rows; rc <= static_cast<uint64_t>(begin + count - 1) / rows; ++rc)
      for (uint64_t cc = 0; cc < col_chunks; ++cc) {
        size_t index = static_cast<size_t>(rc * col_chunks + cc);
        if (d.slab_checked[index]) continue;
        check_one_chunk(d, rc, cc);
        d.slab_checked[index] = true;
      }
  }

  void check_one_chunk(const Dataset& d, uint64_t row_chunk, uint64_t col_chunk) {
    hsize_t offset[2] = {row_chunk * d.slab_chunk[0], col_chunk * d.slab_chunk[1]};
    Where where = Where::at_record(path, static_cast<int64_t>(offset[0]));
    std::string what = cat("dataset '", d.column->name, "' chunk at record ", offset[0]);
    // + 64: room for shuffle and fletcher32 around gzip
    const ChunkFile::Stored at = chunk_file.locate(d.id.get(), offset, compressBound(static_cast<uLong>(d.slab_chunk_bytes)) + 64,
                                                   d.slab_chunk_bytes, where, what);
    if (at.size == 0) return;  // never written: HDF5 fills it
    std::vector<uint8_t> raw(at.size);
    chunk_file.read(at, raw.data(), where, what);
    const uint32_t skipped = at.skipped_filters;
    Hid dcpl = checked(H5Dget_create_plist(d.id.get()), H5Pclose, where, "cannot read dataset properties");
    // Undo the pipeline's size changes in reverse: fletcher32 appends 4 bytes, gzip compresses.
    size_t size = raw.size();
    bool inflated = false;
    for (int i = H5Pget_nfilters(dcpl.get()) - 1; i >= 0; --i) {
      if (skipped & (1u << i)) continue;
      unsigned flags = 0, values[8];
      size_t nvalues = 8;
      H5Z_filter_t f = H5Pget_filter2(dcpl.get(), static_cast<unsigned>(i), &flags, &nvalues, values, 0, nullptr, nullptr);
      if (f == H5Z_FILTER_FLETCHER32) {
        if (size < 4) throw Error(where, cat(what, ": ", size, " bytes, too short for its fletcher32 checksum"));
        size -= 4;
      } else if (f == H5Z_FILTER_DEFLATE) {
        if (inflated) throw Error(where, cat(what, ": gzip applied twice, which this reader does not support"));
        size = inflated_size(raw.data(), size, d.slab_chunk_bytes, where, what);
        inflated = true;
      }
    }
    if (size != d.slab_chunk_bytes)
      throw Error(where, cat(what, " decodes to ", size, " bytes, expected ", d.slab_chunk_bytes, " (its chunk shape)"));
  }

  // Bytes the zlib stream decodes to, counting at most limit + 1.
  static size_t inflated_size(const uint8_t* data, size_t n, size_t limit, const Where& where, const std::string& what) {
    z_stream zs{};
    if (inflateInit(&zs) != Z_OK) throw Error(where, what + ": zlib inflateInit failed");
    std::vector<uint8_t> sink(std::min<size_t>(limit + 1, size_t{1} << 20));
    zs.next_in = const_cast<uint8_t*>(data);
    zs.avail_in = static_cast<uInt>(n);
    size_t total = 0;
    int rc = Z_OK;
    while (rc == Z_OK && total <= limit) {
      zs.next_out = sink.data();
      zs.avail_out = static_cast<uInt>(sink.size());
      rc = inflate(&zs, Z_NO_FLUSH);
      total += sink.size() - zs.avail_out;
      if (rc == Z_BUF_ERROR && zs.avail_in == 0) break;  // stream cut short
      if (rc == Z_BUF_ERROR) rc = Z_OK;
    }
    inflateEnd(&zs);
    if (rc != Z_STREAM_END && total <= limit)
      throw Error(where, cat(what, ": corrupt or truncated gzip data after ", total, " bytes"));
    return total;
  }

  // Opens dataset c, checks rank and integer class; returns its dims.
  std::array<hsize_t, 2> open_dataset(size_t c) {
    const Column& col = kColumns[c];
    Where where{path};
    int rank = col.width == Width::one ? 1 : 2;
    const char* expected = col.width == Width::one ? "[N]" : col.width == Width::seq ? "[N, seq_len]" : "[N, max_predictions]";
    std::string shape = cat("an integer dataset ", expected, " (", col.elem == 4 ? "int32" : "int8", ")");
    htri_t exists = H5Lexists(file.get(), col.name, H5P_DEFAULT);
    if (exists < 0) throw_hdf5(where, cat("cannot look up dataset '", col.name, "'"));
    if (exists == 0) throw Error(where, cat("missing dataset '", col.name, "': expected ", shape));
    Dataset& d = sets[c];
    d.column = &col;
    check_layout_dims(path, MappedFile(path), file.get(), col.name);
    d.id = checked(H5Dopen2(file.get(), col.name, H5P_DEFAULT), H5Dclose, where,
                   cat("'", col.name, "' is not a readable dataset: expected ", shape));
    Hid type = checked(H5Dget_type(d.id.get()), H5Tclose, where, cat("cannot read the type of '", col.name, "'"));
    if (H5Tget_class(type.get()) != H5T_INTEGER || H5Tget_size(type.get()) > 8)
      throw Error(where, cat("dataset '", col.name, "' has type ", numpy_dtype(type.get()), ", expected ", shape));
    Hid space = checked(H5Dget_space(d.id.get()), H5Sclose, where, cat("cannot read the shape of '", col.name, "'"));
    int found_rank = H5Sget_simple_extent_ndims(space.get());
    if (found_rank != rank)
      throw Error(where, cat("dataset '", col.name, "' has rank ", found_rank, ", expected ", shape));
    std::array<hsize_t, 2> dims{0, 1}, max_dims{0, 1};
    if (H5Sget_simple_extent_dims(space.get(), dims.data(), max_dims.data()) < 0)
      throw_hdf5(where, cat("cannot read the shape of '", col.name, "'"));
    check_chunk_shape(d, rank, max_dims, H5Tget_size(type.get()));
    // Bounds that keep every size computed from them far from overflow.
    if (dims[0] > (hsize_t{1} << 40) || dims[1] > (hsize_t{1} << 24))
      throw Error(where, cat("dataset '", col.name, "' has shape [", dims[0], ", ", dims[1],
                             "], expected at most 2^40 records of at most 2^24 values"));
    return dims;
  }

  // libhdf5 1.10 trusts the chunk shape in the layout message and overruns its buffers on a
  // chunk larger than a fixed dimension (found by fuzzing); HDF5 itself never writes one.
  void check_chunk_shape(const Dataset& d, int rank, const std::array<hsize_t, 2>& max_dims, size_t elem) {
    Hid dcpl = checked(H5Dget_create_plist(d.id.get()), H5Pclose, Where{path}, "cannot read dataset properties");
    if (H5Pget_layout(dcpl.get()) != H5D_CHUNKED) return;
    hsize_t chunk[H5S_MAX_RANK] = {};
    int chunk_rank = H5Pget_chunk(dcpl.get(), H5S_MAX_RANK, chunk);
    uint64_t bytes = elem;
    bool ok = chunk_rank == rank;
    for (int i = 0; ok && i < rank; ++i) {
      ok = chunk[i] > 0 && (max_dims[static_cast<size_t>(i)] == H5S_UNLIMITED || chunk[i] <= max_dims[static_cast<size_t>(i)]) &&
           !__builtin_mul_overflow(bytes, chunk[i], &bytes) && bytes <= (uint64_t{1} << 32);
    }
    if (!ok)
      throw Error(Where{path}, cat("dataset '", d.column->name, "' has an impossible chunk shape (rank ", chunk_rank, ": ",
                                   chunk[0], ", ", chunk[1], ") for its maximum shape (", max_dims[0], ", ",
                                   max_dims[1], "): expected chunks within the shape and under 4 GiB"));
  }

  // Raw chunks work when the chunks hold the values exactly as we want them in memory: chunked,
  // gzip or nothing as the only filter, little-endian int32 / signed 8-bit, fill value 0.
  bool raw_layout(Dataset& d) {
    const Column& col = *d.column;
    Hid type(H5Dget_type(d.id.get()), H5Tclose);
    if (!type.valid()) return false;
    bool same_type = col.elem == 4 ? H5Tequal(type.get(), H5T_STD_I32LE) > 0
                                   : H5Tget_size(type.get()) == 1 && H5Tget_sign(type.get()) == H5T_SGN_2;
    Hid dcpl(H5Dget_create_plist(d.id.get()), H5Pclose);
    if (!same_type || !dcpl.valid() || H5Pget_layout(dcpl.get()) != H5D_CHUNKED) return false;
    int rank = col.width == Width::one ? 1 : 2;
    hsize_t chunk[2] = {0, 1};
    if (H5Pget_chunk(dcpl.get(), rank, chunk) != rank || chunk[0] == 0 || chunk[1] == 0) return false;
    int filters = H5Pget_nfilters(dcpl.get());
    if (filters < 0 || filters > 1) return false;
    if (filters == 1) {
      unsigned flags = 0, values[8];
      size_t nvalues = 8;
      if (H5Pget_filter2(dcpl.get(), 0, &flags, &nvalues, values, 0, nullptr, nullptr) != H5Z_FILTER_DEFLATE) return false;
    }
    H5D_fill_value_t fill_kind;
    if (H5Pfill_value_defined(dcpl.get(), &fill_kind) < 0) return false;
    if (fill_kind == H5D_FILL_VALUE_USER_DEFINED) {
      int64_t fill = -1;
      if (H5Pget_fill_value(dcpl.get(), H5T_NATIVE_INT64, &fill) < 0 || fill != 0) return false;
    }
    int64_t cells;
    if (__builtin_mul_overflow(static_cast<int64_t>(chunk[0]), static_cast<int64_t>(chunk[1]), &cells) ||
        cells > (int64_t{1} << 30) / static_cast<int64_t>(col.elem))
      return false;  // absurd chunk: let HDF5 judge it on the slow path
    d.chunk_rows = static_cast<int64_t>(chunk[0]);
    d.chunk_cols = rank == 2 ? static_cast<int64_t>(chunk[1]) : 1;
    d.chunk_bytes = static_cast<size_t>(cells) * col.elem;
    d.deflate = filters == 1;
    d.cache.assign(static_cast<size_t>((d.width + d.chunk_cols - 1) / d.chunk_cols), nullptr);
    return true;
  }

  void check_range(int64_t begin, int64_t count) const {
    if (begin < 0 || count < 0 || begin > records || count > records - begin)
      throw Error(Where{path}, cat("records [", begin, ", ", begin, "+", count, ") outside [0, ", records, ")"));
  }

  struct Job {
    Dataset* set;
    std::shared_ptr<RawChunk> chunk;
    int64_t col_chunk, row_lo, row_hi;  // rows of the range this chunk provides
    uint8_t* out;                       // the batch column
  };

  // Fetches the stored bytes of one chunk (serial: HDF5 holds its lock for this).
  std::shared_ptr<RawChunk> fetch(Dataset& d, int64_t row_chunk, int64_t col_chunk) {
    auto& cached = d.cache[static_cast<size_t>(col_chunk)];
    if (cached && cached->row_chunk == row_chunk) return cached;
    auto c = std::make_shared<RawChunk>();
    c->row_chunk = row_chunk;
    c->data = std::make_unique_for_overwrite<uint8_t[]>(d.chunk_bytes);
    c->data_size = d.chunk_bytes;
    hsize_t offset[2] = {static_cast<hsize_t>(row_chunk * d.chunk_rows), static_cast<hsize_t>(col_chunk * d.chunk_cols)};
    Where where = Where::at_record(path, row_chunk * d.chunk_rows);
    const std::string what = cat("chunk of dataset '", d.column->name, "' at record ", row_chunk * d.chunk_rows);
    const ChunkFile::Stored at =
        chunk_file.locate(d.id.get(), offset, compressBound(static_cast<uLong>(d.chunk_bytes)), d.chunk_bytes, where, what);
    if (at.size == 0) {  // never written: all fill value (0)
      std::memset(c->data.get(), 0, d.chunk_bytes);
      c->deflated = false, c->decoded = d.chunk_bytes;
      return c;
    }
    c->stored = std::make_unique_for_overwrite<uint8_t[]>(at.size);
    c->stored_size = at.size;
    chunk_file.read(at, c->stored.get(), where, what);
    const uint32_t skipped = at.skipped_filters;
    c->deflated = d.deflate && !(skipped & 1u);  // bit 0 set: gzip was skipped for this chunk
    return c;
  }

  static void run_job(const Job& j, int64_t begin, const std::string& file) {
    const Dataset& d = *j.set;
    const size_t elem = d.column->elem;
    const int64_t first_row = j.chunk->row_chunk * d.chunk_rows;
    const int64_t col0 = j.col_chunk * d.chunk_cols;
    const int64_t ncols = std::min(d.chunk_cols, d.width - col0);
    j.chunk->ensure(static_cast<size_t>((j.row_hi - first_row) * d.chunk_cols) * elem, file,
                    cat("dataset '", d.column->name, "' chunk at record ", first_row));
    const uint8_t* src = j.chunk->data.get() + static_cast<size_t>((j.row_lo - first_row) * d.chunk_cols) * elem;
    uint8_t* dst = j.out + static_cast<size_t>((j.row_lo - begin) * d.width + col0) * elem;
    if (d.chunk_cols == d.width) {  // whole rows: one block
      std::memcpy(dst, src, static_cast<size_t>((j.row_hi - j.row_lo) * d.width) * elem);
      return;
    }
    for (int64_t r = j.row_lo; r < j.row_hi; ++r) {
      std::memcpy(dst, src, static_cast<size_t>(ncols) * elem);
      dst += static_cast<size_t>(d.width) * elem;
      src += static_cast<size_t>(d.chunk_cols) * elem;
    }
  }

  void read_raw(int64_t begin, int64_t count, BertBatch& out) {
    std::vector<Job> jobs;
    size_t inflate_bytes = 0;
    for (size_t c = 0; c < sets.size(); ++c) {
      Dataset& d = sets[c];
      if (!d.raw) continue;
      const int64_t col_chunks = static_cast<int64_t>(d.cache.size());
      for (int64_t rc = begin / d.chunk_rows; rc <= (begin + count - 1) / d.chunk_rows; ++rc)
        for (int64_t cc = 0; cc < col_chunks; ++cc) {
          int64_t lo = std::max(begin, rc * d.chunk_rows), hi = std::min(begin + count, (rc + 1) * d.chunk_rows);
          jobs.push_back({&d, fetch(d, rc, cc), cc, lo, hi, column_data(out, c)});
          inflate_bytes += d.chunk_bytes;
        }
    }
    // Inflating is the real work; spread it when there is enough of it to pay for the threads.
    if (jobs.size() > 1 && inflate_bytes > (size_t{1} << 20))
      tbb::parallel_for(size_t{0}, jobs.size(), [&](size_t i) { run_job(jobs[i], begin, path); });
    else
      for (const Job& j : jobs) run_job(j, begin, path);
    for (const Job& j : jobs) j.set->cache[static_cast<size_t>(j.col_chunk)] = j.chunk;  // last row-chunk wins
  }

  void read_slab(size_t c, int64_t begin, int64_t count, BertBatch& out) {
    Dataset& d = sets[c];
    check_slab_chunks(d, begin, count);
    const bool rank2 = d.column->width != Width::one;
    hsize_t start[2] = {static_cast<hsize_t>(begin), 0};
    hsize_t size[2] = {static_cast<hsize_t>(count), static_cast<hsize_t>(d.width)};
    Where where = Where::at_record(path, begin);
    Hid space = checked(H5Dget_space(d.id.get()), H5Sclose, where, "cannot get dataspace");
    if (H5Sselect_hyperslab(space.get(), H5S_SELECT_SET, start, nullptr, size, nullptr) < 0)
      throw_hdf5(where, cat("cannot select records of '", d.column->name, "'"));
    Hid memory = checked(H5Screate_simple(rank2 ? 2 : 1, size, nullptr), H5Sclose, where, "cannot create dataspace");
    if (H5Dread(d.id.get(), memory_type(*d.column), memory.get(), space.get(), dxpl.get(), column_data(out, c)) < 0)
      throw_hdf5(where, cat("cannot read dataset '", d.column->name, "' records [", begin, ", ", begin + count,
                            ") as ", d.column->elem == 4 ? "int32" : "int8"));
  }

  void read_range(int64_t begin, int64_t count, BertBatch& out) {
    quiet_hdf5();
    check_range(begin, count);
    out.resize(count, seq, max_pred);
    if (count == 0) return;
    read_raw(begin, count, out);
    for (size_t c = 0; c < sets.size(); ++c)
      if (!sets[c].raw) read_slab(c, begin, count, out);
    // Positions index into the sequence downstream; a bad one must not get that far.
    for (size_t i = 0; i < out.masked_lm_positions.size(); ++i) {
      int32_t p = out.masked_lm_positions[i];
      if (p < 0 || p >= seq)
        throw Error(Where::at_record(path, begin + static_cast<int64_t>(i) / max_pred),
                    cat("masked_lm_positions[", static_cast<int64_t>(i) % max_pred, "] = ", p,
                        ", expected a position in [0, ", seq, ")"));
    }
  }
};

BertShardReader::BertShardReader(const std::string& path, BertReadPath read_path)
    : impl_(std::make_unique<Impl>(path, read_path)) {}
BertShardReader::~BertShardReader() = default;
BertShardReader::BertShardReader(BertShardReader&&) noexcept = default;
BertShardReader& BertShardReader::operator=(BertShardReader&&) noexcept = default;

const std::string& BertShardReader::path() const { return impl_->path; }
int64_t BertShardReader::size() const { return impl_->records; }
int64_t BertShardReader::seq_len() const { return impl_->seq; }
int64_t BertShardReader::max_predictions() const { return impl_->max_pred; }
bool BertShardReader::raw_chunk_path() const {
  return std::all_of(impl_->sets.begin(), impl_->sets.end(), [](const Dataset& d) { return d.raw; });
}

BertRecord BertShardReader::read(int64_t index) {
  if (index < 0 || index >= impl_->records)
    throw Error(Where::at_record(impl_->path, index), cat("record index outside [0, ", impl_->records, ")"));
  impl_->read_range(index, 1, impl_->one);
  return impl_->one.record(0);
}

void BertShardReader::read_range(int64_t begin, int64_t count, BertBatch& out) { impl_->read_range(begin, count, out); }

uint64_t count_bert_records(const std::string& path) {
  return static_cast<uint64_t>(BertShardReader(path).size());
}

// ---------------------------------------------------------------------------------------------
// inspect

namespace {

std::string describe_dataset(hid_t file, const char* name) {
  Hid d(H5Dopen2(file, name, H5P_DEFAULT), H5Dclose);
  Hid type(H5Dget_type(d.get()), H5Tclose), space(H5Dget_space(d.get()), H5Sclose);
  Hid dcpl(H5Dget_create_plist(d.get()), H5Pclose);
  if (!type.valid() || !space.valid() || !dcpl.valid()) return "(cannot describe: " + take_hdf5_errors() + ")";
  auto tuple = [](const hsize_t* v, int n) {
    std::string s = "(";
    for (int i = 0; i < n; ++i) s += cat(i ? ", " : "", v[i]);
    return s + (n == 1 ? ",)" : ")");
  };
  hsize_t dims[H5S_MAX_RANK], chunk[H5S_MAX_RANK];
  int rank = H5Sget_simple_extent_dims(space.get(), dims, nullptr);
  std::string text = cat("dtype=", numpy_dtype(type.get()), " shape=", tuple(dims, std::max(rank, 0)));
  if (H5Pget_layout(dcpl.get()) != H5D_CHUNKED) return text + " layout=contiguous";
  int chunk_rank = H5Pget_chunk(dcpl.get(), H5S_MAX_RANK, chunk);
  text += cat(" chunks=", tuple(chunk, std::max(chunk_rank, 0)));
  int filters = H5Pget_nfilters(dcpl.get());
  std::string compression = "none";
  for (int i = 0; i < filters; ++i) {
    unsigned flags = 0, values[8] = {};
    size_t nvalues = 8;
    H5Z_filter_t f = H5Pget_filter2(dcpl.get(), static_cast<unsigned>(i), &flags, &nvalues, values, 0, nullptr, nullptr);
    std::string one = f == H5Z_FILTER_DEFLATE   ? cat("gzip level ", nvalues ? values[0] : 0)
                      : f == H5Z_FILTER_SHUFFLE ? std::string("shuffle")
                      : f == H5Z_FILTER_FLETCHER32 ? std::string("fletcher32")
                                                   : cat("filter ", f);
    compression = i == 0 ? one : compression + " + " + one;
  }
  return text + " compression=" + compression;
}

template <typename T>
std::string join(const T* v, int64_t n) {
  std::string s;
  for (int64_t i = 0; i < n; ++i) s += cat(i ? " " : "", static_cast<int>(v[i]));
  return s;
}

}  // namespace

void inspect_bert_shard(const std::string& path, std::ostream& out, int max_records) {
  BertShardReader reader(path);
  out << path << ": NVIDIA BERT HDF5 shard\n"
      << "  records " << reader.size() << ", seq_len " << reader.seq_len() << ", max_predictions "
      << reader.max_predictions() << ", read path " << (reader.raw_chunk_path() ? "raw chunks" : "hyperslab") << "\n";
  {
    quiet_hdf5();
    Hid file(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose);
    if (!file.valid()) throw_hdf5(Where{path}, "cannot open as HDF5");
    for (const Column& c : kColumns) out << "  " << c.name << ": " << describe_dataset(file.get(), c.name) << "\n";
  }
  int64_t n = std::min<int64_t>(std::max(max_records, 0), reader.size());
  BertBatch b;
  reader.read_range(0, n, b);
  const int64_t seq = b.seq_len, mp = b.max_predictions;
  for (int64_t i = 0; i < n; ++i) {
    const int8_t* mask = b.input_mask.data() + i * seq;
    int64_t tokens = std::count_if(mask, mask + seq, [](int8_t m) { return m != 0; });
    const int32_t* pos = b.masked_lm_positions.data() + i * mp;
    int64_t preds = mp;
    while (preds > 0 && pos[preds - 1] == 0) --preds;  // padding is 0 ([CLS] is never masked)
    out << "record " << i << ": tokens " << tokens << ", predictions " << preds << ", next_sentence_label "
        << static_cast<int>(b.next_sentence_labels[static_cast<size_t>(i)]) << "\n"
        << "  input_ids: " << join(b.input_ids.data() + i * seq, tokens) << "\n"
        << "  segment_ids: " << join(b.segment_ids.data() + i * seq, tokens) << "\n"
        << "  masked_lm_positions: " << join(pos, preds) << "\n"
        << "  masked_lm_ids: " << join(b.masked_lm_ids.data() + i * mp, preds) << "\n";
  }
}

}  // namespace pretrain
