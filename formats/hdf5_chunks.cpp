// HDF5 plumbing: no stack printing, its messages folded into our errors, and raw chunk reads
// located through the chunk index and bounded by the file (see hdf5_chunks.h).
#include "formats/hdf5_chunks.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <utility>
#include <vector>

namespace pretrain::hdf5 {

namespace {

herr_t collect_error(unsigned, const H5E_error2_t* e, void* data) {
  auto* messages = static_cast<std::vector<std::string>*>(data);
  std::string desc = e->desc && *e->desc ? e->desc : (e->func_name ? e->func_name : "?");
  if (messages->empty() || messages->back() != desc) messages->push_back(desc);
  return 0;
}

// libhdf5 1.10 frees a file whose H5Fclose failed (its metadata flush hit a full disk or a
// file-size limit) but keeps its id; the library's atexit cleanup (H5close) then closes it a second
// time and the process dies with SIGSEGV after our error was printed (make-pretraining-shards on a
// tiny filesystem, chaos.sh diskfull). So the cleanup is ours: HDF5 is told before it starts not to
// register its own (H5dont_atexit only sets a flag that library initialisation reads), and ours
// runs H5close at exit as HDF5 would, unless a close of ours failed. Where the library had started
// before this library was loaded (h5py first in a Python process), its own cleanup stays.
std::atomic<bool> a_close_failed{false};

void close_library_at_exit() {
  if (!a_close_failed.load()) H5close();
}

[[maybe_unused]] const bool kOwnAtexitCleanup = H5dont_atexit() >= 0 && std::atexit(close_library_at_exit) == 0;

}  // namespace

void Hid::note_failed_close() { a_close_failed.store(true); }

// HDF5's thread-safe build keeps the error stack, and whether it auto-prints, per thread.
void quiet_hdf5() {
  thread_local bool quiet = false;
  if (!quiet) {
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
    quiet = true;
  }
}

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

Hid checked(hid_t id, Hid::Closer close, const Where& where, const std::string& what) {
  if (id < 0) throw_hdf5(where, what);
  return Hid(id, close);
}

std::string numpy_dtype(hid_t type) {
  if (H5Tget_class(type) != H5T_INTEGER) return cat("class ", static_cast<int>(H5Tget_class(type)));
  size_t size = H5Tget_size(type);
  char order = size == 1 ? '|' : H5Tget_order(type) == H5T_ORDER_BE ? '>' : '<';
  char kind = H5Tget_sign(type) == H5T_SGN_NONE ? 'u' : 'i';
  return cat(order, kind, size);
}

// ---------------------------------------------------------------------------------------------
// ChunkFile

ChunkFile::ChunkFile(const std::string& path, hid_t file) : path_(path) {
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

ChunkFile& ChunkFile::operator=(ChunkFile&& o) noexcept {
  std::swap(fd_, o.fd_), std::swap(path_, o.path_), std::swap(size_, o.size_), std::swap(base_, o.base_);
  return *this;
}

ChunkFile::~ChunkFile() {
  if (fd_ >= 0) ::close(fd_);
}

ChunkFile::Stored ChunkFile::locate(hid_t set, const hsize_t* offset, uint64_t limit, size_t chunk_bytes,
                                    const Where& where, const std::string& what) const {
  Stored s;
  hsize_t size = 0;
  if (H5Dget_chunk_info_by_coord(set, offset, &s.skipped_filters, &s.addr, &size) < 0) throw_hdf5(where, "cannot locate " + what);
  s.size = size;
  // A chunk never written has no address. One with an address and 0 stored bytes is damage: libhdf5
  // 1.10 reads it as a chunk of the dataset's full size and copies past its buffer (ASan:
  // heap-buffer-overflow in H5VM_memcpyvv under H5Dread, found by fuzzing).
  if (s.size == 0 && s.addr != HADDR_UNDEF)
    throw Error(where, cat(what, " claims 0 stored bytes at address ", s.addr, ": a written chunk is never empty"));
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

void ChunkFile::read(const Stored& s, uint8_t* out, const Where& where, const std::string& what) const {
  uint64_t done = 0;
  while (done < s.size) {
    ssize_t got = ::pread(fd_, out + done, static_cast<size_t>(s.size - done), static_cast<off_t>(base_ + s.addr + done));
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) throw_errno("cannot read " + what, path_);
    if (got == 0) throw Error(where, cat(what, ": file ends ", done, " bytes into its ", s.size, " stored bytes"));
    done += static_cast<uint64_t>(got);
  }
}

}  // namespace pretrain::hdf5
