// HDF5 plumbing shared by the BERT shard writer, reader and inspect (internal to formats/):
// HDF5's error stack folded into our errors instead of printed, ids closed by RAII, and the chunk
// index: where a chunk's stored bytes lie, read straight from the file and bounded by its size.
#pragma once
#include <hdf5.h>

#include <cstdint>
#include <string>

#include "common/error.h"

namespace pretrain::hdf5 {

// Turns off HDF5's automatic error printing for the calling thread. HDF5's thread-safe build keeps
// the error stack, and whether it auto-prints, per thread: call this on every thread before HDF5.
void quiet_hdf5();

// The innermost (most specific) messages of the current thread's HDF5 error stack; clears it.
std::string take_hdf5_errors();

// Throws Error(where, what + HDF5's messages).
[[noreturn]] void throw_hdf5(const Where& where, const std::string& what);

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
    if (rc < 0) note_failed_close();
    return rc >= 0;
  }

 private:
  void reset() {
    if (id_ >= 0 && close_(id_) < 0) note_failed_close();
    id_ = -1;
  }
  // After a failed close libhdf5 1.10 may hold a freed file: the library is then not closed at
  // exit (hdf5_chunks.cpp), which would touch it.
  static void note_failed_close();
  hid_t id_ = -1;
  Closer close_ = nullptr;
};

// Wraps `id`, or throws (via throw_hdf5) when HDF5 returned a failure.
Hid checked(hid_t id, Hid::Closer close, const Where& where, const std::string& what);

// An integer type as numpy spells it ("<i4", "|i1", ">u8"); other classes by number.
std::string numpy_dtype(hid_t type);

// Reads a chunk's stored bytes at the address and size the chunk index gives, bounded by the
// file's size. Not H5Dread_chunk: libhdf5 1.10 reads an unfiltered chunk at the size its layout
// message states, which a damaged file can set apart from the index's size that sized our buffer
// (ASan: heap-buffer-overflow in pread under H5Dread_chunk), and it follows an address past the
// end of the file.
class ChunkFile {
 public:
  ChunkFile() = default;
  // `file` is `path` opened with H5Fopen; its user block size is where chunk addresses start.
  ChunkFile(const std::string& path, hid_t file);
  ChunkFile(const ChunkFile&) = delete;
  ChunkFile& operator=(ChunkFile&& o) noexcept;
  ~ChunkFile();

  struct Stored {
    uint64_t size = 0;  // 0: never written (all fill value)
    uint32_t skipped_filters = 0;
    haddr_t addr = HADDR_UNDEF;
  };

  // Where the chunk at `offset` of dataset `set` lies, at most `limit` stored bytes for a chunk of
  // `chunk_bytes`, inside the file; `what` names it for errors. Throws Error for a chunk outside
  // those bounds or with an address but no stored bytes.
  Stored locate(hid_t set, const hsize_t* offset, uint64_t limit, size_t chunk_bytes, const Where& where,
                const std::string& what) const;

  // The `s.size` stored bytes into `out`.
  void read(const Stored& s, uint8_t* out, const Where& where, const std::string& what) const;

 private:
  std::string path_;
  int fd_ = -1;
  uint64_t size_ = 0, base_ = 0;
};

}  // namespace pretrain::hdf5
