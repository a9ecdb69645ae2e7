// BertShardReader: opens any shard that h5py can read after checking what libhdf5 1.10 would trust
// (hdf5_guards.h, and the chunk shapes here), then reads each dataset on one of two paths:
// raw chunks located through the chunk index and inflated by us (formats/deflate.h) on oneTBB
// workers (HDF5 holds one global lock, gzip inside H5Dread included), where the layout stores values
// exactly as memory holds them; hyperslab reads through HDF5's filters and type conversion
// everywhere else, each chunk checked once to decode to its full size before HDF5 reads it.
#include "formats/bert_hdf5.h"

#include <hdf5.h>
#include <tbb/parallel_for.h>
#include <zlib.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/error.h"
#include "common/file.h"
#include "formats/bert_hdf5_layout.h"
#include "formats/deflate.h"
#include "formats/hdf5_chunks.h"
#include "formats/hdf5_guards.h"

namespace pretrain {

using bert_hdf5::column_data;
using bert_hdf5::column_width;
using bert_hdf5::Column;
using bert_hdf5::column_count;
using bert_hdf5::kColumns;
using bert_hdf5::kNvidiaColumns;
using bert_hdf5::kPackPositions;
using bert_hdf5::kPositions;
using bert_hdf5::memory_type;
using bert_hdf5::Width;
using bert_hdf5::width_name;
using hdf5::check_hdf5_signature;
using hdf5::check_chunked_layout;
using hdf5::check_root_group;
using hdf5::checked;
using hdf5::ChunkFile;
using hdf5::Hid;
using hdf5::numpy_dtype;
using hdf5::quiet_hdf5;
using hdf5::throw_hdf5;

namespace {

// The index of dataset `name` in kColumns (kColumns.size() when there is none).
constexpr size_t column_index(std::string_view name) {
  size_t c = 0;
  while (c < kColumns.size() && name != kColumns[c].name) ++c;
  return c;
}

// HDF5 clamps out-of-range values during conversion unless told otherwise; we fail instead.
H5T_conv_ret_t refuse_overflow(H5T_conv_except_t kind, hid_t, hid_t, void*, void*, void*) {
  return kind == H5T_CONV_EXCEPT_RANGE_HI || kind == H5T_CONV_EXCEPT_RANGE_LOW ? H5T_CONV_ABORT
                                                                               : H5T_CONV_UNHANDLED;
}

// One raw chunk, inflated whole the first time a read needs any of it (deflate::inflate: libdeflate
// has no streaming interface, and at ~1 GB/s a whole 256 KiB chunk costs ~0.25 ms).
struct RawChunk {
  int64_t row_chunk = -1;
  // Left uninitialised: every byte is overwritten before it is read.
  std::unique_ptr<uint8_t[]> stored, data;  // bytes as stored in the file; the decoded chunk
  size_t stored_size = 0, data_size = 0;
  bool decoded = false;  // data is valid
  bool deflated = true;

  // Makes data valid. `what` names the chunk for errors.
  void ensure(const std::string& file, const std::string& what) {
    if (decoded) return;
    if (!deflated) {
      if (stored_size != data_size)
        throw Error(Where{file}, cat(what, ": unfiltered chunk has ", stored_size, " bytes, expected ", data_size));
      std::memcpy(data.get(), stored.get(), data_size);
    } else {
      deflate::inflate(stored.get(), stored_size, data.get(), data_size, Where{file}, what);
    }
    decoded = true;
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

}  // namespace

struct BertShardReader::Impl {
  std::string path;
  Hid file, dxpl;
  ChunkFile chunk_file;
  std::array<Dataset, kColumns.size()> sets;
  size_t columns = kNvidiaColumns;  // datasets in the file: six, ten when packed
  int64_t records = 0, seq = 0, max_pred = 0, max_pack = 0;
  std::array<bool, kColumns.size()> wanted;  // the datasets read_range fills (read_only)
  BertBatch one;  // scratch for read()

  Impl(const std::string& p, BertReadPath read_path) : path(p) {
    wanted.fill(true);
    quiet_hdf5();
    check_hdf5_signature(path);
    Where where{path};
    file = checked(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose, where, "cannot open as HDF5");
    const MappedFile map(path);  // the guards read object headers from it before libhdf5 decodes them
    check_root_group(path, map, file.get());
    chunk_file = ChunkFile(path, file.get());
    dxpl = checked(H5Pcreate(H5P_DATASET_XFER), H5Pclose, where, "cannot create transfer property list");
    if (H5Pset_type_conv_cb(dxpl.get(), refuse_overflow, nullptr) < 0) throw_hdf5(where, "cannot set conversion callback");

    columns = packed_datasets() ? kColumns.size() : kNvidiaColumns;
    std::array<std::array<hsize_t, 2>, kColumns.size()> dims{};
    for (size_t c = 0; c < columns; ++c) dims[c] = open_dataset(c, map);
    records = static_cast<int64_t>(dims[0][0]);
    seq = static_cast<int64_t>(dims[0][1]);
    max_pred = static_cast<int64_t>(dims[kPositions][1]);
    max_pack = columns > kNvidiaColumns ? static_cast<int64_t>(dims[kPackPositions][1]) : 0;
    if (seq < 1) throw Error(where, "dataset 'input_ids' has seq_len 0, expected at least 1");
    if (columns > kNvidiaColumns && (max_pack < 1 || max_pack > 127))
      throw Error(where, cat("dataset 'next_sentence_positions' has ", max_pack,
                             " instances per row, expected 1 to 127 (sequence_ids is int8)"));
    for (size_t c = 0; c < columns; ++c) {
      int64_t w = column_width(kColumns[c], seq, max_pred, max_pack);
      bool rank2 = kColumns[c].width != Width::one;
      if (static_cast<int64_t>(dims[c][0]) != records || (rank2 && static_cast<int64_t>(dims[c][1]) != w))
        throw Error(where, cat("dataset '", kColumns[c].name, "' has shape [", dims[c][0], rank2 ? cat(", ", dims[c][1]) : "",
                               "], expected [", records, rank2 ? cat(", ", w) : "",
                               "] (N from input_ids, seq_len from input_ids, max_predictions from masked_lm_positions",
                               columns > kNvidiaColumns ? ", max_pack from next_sentence_positions)" : ")"));
      sets[c].width = w;
    }
    for (size_t c = 0; c < columns; ++c) {
      if (read_path == BertReadPath::automatic) sets[c].raw = raw_layout(sets[c]);
      if (!sets[c].raw) prepare_slab_checks(sets[c]);
    }
  }

  // Whether the file is packed: all four packed datasets or none of them.
  bool packed_datasets() {
    const char* present = nullptr;
    const char* missing = nullptr;  // the first of each
    for (size_t c = kNvidiaColumns; c < kColumns.size(); ++c) {
      htri_t exists = H5Lexists(file.get(), kColumns[c].name, H5P_DEFAULT);
      if (exists < 0) throw_hdf5(Where{path}, cat("cannot look up dataset '", kColumns[c].name, "'"));
      const char*& first = exists ? present : missing;
      if (!first) first = kColumns[c].name;
    }
    if (present && missing)
      throw Error(Where{path}, cat("missing dataset '", missing, "' of a packed shard (it has '", present,
                                   "'): expected all four of position_ids, sequence_ids, next_sentence_positions, "
                                   "packed_next_sentence_labels, or none"));
    return present != nullptr;
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

  // Opens dataset c (`map`: the file, for the layout guard), checks rank and integer class; returns its dims.
  std::array<hsize_t, 2> open_dataset(size_t c, const MappedFile& map) {
    const Column& col = kColumns[c];
    Where where{path};
    int rank = col.width == Width::one ? 1 : 2;
    const char* expected = width_name(col);
    std::string shape = cat("an integer dataset ", expected, " (", col.elem == 4 ? "int32" : "int8", ")");
    htri_t exists = H5Lexists(file.get(), col.name, H5P_DEFAULT);
    if (exists < 0) throw_hdf5(where, cat("cannot look up dataset '", col.name, "'"));
    if (exists == 0) throw Error(where, cat("missing dataset '", col.name, "': expected ", shape));
    Dataset& d = sets[c];
    d.column = &col;
    check_chunked_layout(path, map, file.get(), col.name);
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
    Hid dcpl = checked(H5Dget_create_plist(d.id.get()), H5Pclose, where, "cannot read dataset properties");
    check_chunk_shape(d, dcpl.get(), rank, max_dims, H5Tget_size(type.get()));
    check_compact_size(d, dcpl.get(), dims, H5Tget_size(type.get()));
    // Bounds that keep every size computed from them far from overflow.
    if (dims[0] > (hsize_t{1} << 40) || dims[1] > (hsize_t{1} << 24))
      throw Error(where, cat("dataset '", col.name, "' has shape [", dims[0], ", ", dims[1],
                             "], expected at most 2^40 records of at most 2^24 values"));
    return dims;
  }

  // libhdf5 1.10 trusts the chunk shape in the layout message and overruns its buffers on a
  // chunk larger than a fixed dimension (found by fuzzing); HDF5 itself never writes one.
  void check_chunk_shape(const Dataset& d, hid_t dcpl, int rank, const std::array<hsize_t, 2>& max_dims, size_t elem) {
    if (H5Pget_layout(dcpl) != H5D_CHUNKED) return;
    hsize_t chunk[H5S_MAX_RANK] = {};
    int chunk_rank = H5Pget_chunk(dcpl, H5S_MAX_RANK, chunk);
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

  // A compact dataset keeps its values in its layout message, whose own size field libhdf5 1.10
  // trusts: H5Dread copies the dataspace's bytes out of a buffer of that size, so a damaged size
  // (0: no buffer at all) crashed the reader and h5py alike (SEGV in H5VM_memcpyvv under
  // H5D__contig_read; found by fuzzing). HDF5 itself stores exactly the dataspace's bytes.
  void check_compact_size(const Dataset& d, hid_t dcpl, const std::array<hsize_t, 2>& dims, size_t elem) {
    if (H5Pget_layout(dcpl) != H5D_COMPACT) return;
    uint64_t expected = elem;
    const bool fits = !__builtin_mul_overflow(expected, dims[0], &expected) && !__builtin_mul_overflow(expected, dims[1], &expected);
    const hsize_t stored = H5Dget_storage_size(d.id.get());
    if (!fits || stored != expected)
      throw Error(Where{path}, cat("dataset '", d.column->name, "' is compact with ", stored, " bytes stored for shape [",
                                   dims[0], d.column->width == Width::one ? std::string() : cat(", ", dims[1]), "] of ",
                                   elem, "-byte values: expected ", fits ? cat(expected) : std::string("that many"),
                                   " (the file is damaged)"));
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
      c->deflated = false, c->decoded = true;
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
    j.chunk->ensure(file, cat("dataset '", d.column->name, "' chunk at record ", first_row));
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
    for (size_t c = 0; c < columns; ++c) {
      Dataset& d = sets[c];
      if (!d.raw || !wanted[c]) continue;
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
    out.resize(count, seq, max_pred, max_pack);
    if (count == 0) return;
    read_raw(begin, count, out);
    for (size_t c = 0; c < columns; ++c)
      if (!sets[c].raw && wanted[c]) read_slab(c, begin, count, out);
    // Positions index into the sequence downstream; a bad one must not get that far.
    for (size_t i = 0; wanted[kPositions] && i < out.masked_lm_positions.size(); ++i) {
      int32_t p = out.masked_lm_positions[i];
      if (p < 0 || p >= seq)
        throw Error(Where::at_record(path, begin + static_cast<int64_t>(i) / max_pred),
                    cat("masked_lm_positions[", static_cast<int64_t>(i) % max_pred, "] = ", p,
                        ", expected a position in [0, ", seq, ")"));
    }
    if (max_pack > 0) check_packed_indices(begin, out);
  }

  // A packed row's values that index downstream (position embeddings, NSP gathers, the attention
  // mask) must be in range; the row's other invariants are shard-tool verify's.
  void check_packed_indices(int64_t begin, const BertBatch& out) const {
    // Column c of the batch (unread columns are skipped), `width` values a record.
    auto in = [&](size_t c, const auto& v, int64_t width, int64_t lo, int64_t hi) {
      for (size_t i = 0; wanted[c] && i < v.size(); ++i)
        if (v[i] < lo || v[i] > hi)
          throw Error(Where::at_record(path, begin + static_cast<int64_t>(i) / width),
                      cat(kColumns[c].name, "[", static_cast<int64_t>(i) % width, "] = ", static_cast<int>(v[i]),
                          ", expected a value in [", lo, ", ", hi, "]"));
    };
    in(column_index("position_ids"), out.position_ids, seq, 0, seq - 1);
    in(column_index("sequence_ids"), out.sequence_ids, seq, 0, max_pack);
    in(kPackPositions, out.next_sentence_positions, max_pack, 0, seq - 1);
    in(column_index("packed_next_sentence_labels"), out.packed_next_sentence_labels, max_pack, -1, 1);
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
int64_t BertShardReader::max_pack() const { return impl_->max_pack; }
bool BertShardReader::raw_chunk_path() const {
  return std::all_of(impl_->sets.begin(), impl_->sets.begin() + static_cast<std::ptrdiff_t>(impl_->columns),
                     [](const Dataset& d) { return d.raw; });
}

BertRecord BertShardReader::read(int64_t index) {
  if (index < 0 || index >= impl_->records)
    throw Error(Where::at_record(impl_->path, index), cat("record index outside [0, ", impl_->records, ")"));
  impl_->read_range(index, 1, impl_->one);
  return impl_->one.record(0);
}

void BertShardReader::read_range(int64_t begin, int64_t count, BertBatch& out) { impl_->read_range(begin, count, out); }

void BertShardReader::read_only(std::span<const std::string_view> datasets) {
  std::array<bool, kColumns.size()> wanted{};
  for (std::string_view name : datasets) {
    const size_t c = column_index(name);
    if (c == kColumns.size()) throw UsageError(cat("read_only: no BERT shard has a dataset '", name, "'"));
    wanted[c] = true;
  }
  impl_->wanted = wanted;
}

uint64_t count_bert_records(const std::string& path) {
  return static_cast<uint64_t>(BertShardReader(path).size());
}

}  // namespace pretrain
