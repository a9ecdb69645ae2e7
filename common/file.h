// Files: atomic outputs (write name.tmp-<pid>, fsync, rename; removed unless committed), read-only
// memory maps, and small helpers. An interrupted run never leaves a half file under the real name.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace pretrain {

// Bytes read from a file: grows without zero-filling what it adds (read() overwrites the bytes
// that are used; filling 4-8 MB per read was ~1% of a plain-XML wikiprep run, and a vector with a
// non-initializing allocator still loops over each byte, 70% of an instrumented fuzz build's time).
struct ReadBuffer {
  std::unique_ptr<char[]> bytes;
  size_t size = 0;  // bytes in use, from bytes[0]
  size_t capacity = 0;

  // Room for n bytes; the `size` in use are kept.
  void reserve(size_t n) {
    if (n <= capacity) return;
    auto more = std::make_unique_for_overwrite<char[]>(n);
    if (size > 0) std::memcpy(more.get(), bytes.get(), size);
    bytes = std::move(more);
    capacity = n;
  }
};

class AtomicFile {
 public:
  // open_fd = false for writers that open the temp path themselves (HDF5). A path that is a
  // device or FIFO (/dev/null, /dev/stdout, a named pipe) is written in place: no temp file, no
  // rename, which would replace the device with a plain file.
  explicit AtomicFile(std::string path, bool open_fd = true);
  // For outputs made in steps that a later run continues: the temp file is `path`.partial, a
  // fixed name that outlives the process (never removed by the destructor), cut to its first
  // `keep` bytes and appended to. Throws when it holds fewer than `keep` bytes. flush() makes the
  // bytes written so far safe from a kill of the process.
  static AtomicFile resumable(std::string path, uint64_t keep);
  ~AtomicFile();  // removes the temp file unless commit() ran (or it is resumable)
  AtomicFile(AtomicFile&& other) noexcept;
  AtomicFile& operator=(AtomicFile&&) = delete;
  AtomicFile(const AtomicFile&) = delete;

  const std::string& path() const { return path_; }
  const std::string& tmp_path() const { return tmp_path_; }
  uint64_t bytes_written() const { return written_; }

  void write(const void* data, size_t n);  // buffered
  void write(std::string_view s) { write(s.data(), s.size()); }
  template <typename T>
  void write_pod(const T& v) { write(&v, sizeof v); }
  void flush();

  // Flushes, fsyncs and renames onto path(); fsyncs the directory. Call once.
  void commit();
  void abandon();  // remove the temp file now

 private:
  AtomicFile(std::string path, std::string tmp_path) : path_(std::move(path)), tmp_path_(std::move(tmp_path)) {}
  std::string path_, tmp_path_;
  int fd_ = -1;
  bool done_ = false;
  bool keep_ = false;  // resumable: the destructor closes the temp file and leaves it
  bool direct_ = false;  // path is a device or FIFO: written in place, tmp_path() == path()
  uint64_t written_ = 0;
  std::vector<char> buffer_;
};

// An output directory's lock: two runs writing one directory would interleave their shards and
// manifests, so each tool that writes one holds flock(2) on `dir/.lock` while it runs. The kernel
// drops the lock when the process ends, however it ends (kill -9 included), so a crash leaves
// nothing stale that blocks the next run. The file holds the holder's pid (for the refusal's
// message) and is removed when the holder lets go. Under mpirun one rank takes it for the job
// (lock_dir_for_job in communicator.h).
class DirLock {
 public:
  static constexpr const char* kFileName = ".lock";
  // Creates dir when missing. Throws Error naming dir and the holder's pid when another process
  // (or another DirLock of this one) holds it.
  explicit DirLock(const std::string& dir);
  ~DirLock();  // removes the file, then lets go
  DirLock(DirLock&& other) noexcept;
  DirLock& operator=(DirLock&&) = delete;
  DirLock(const DirLock&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  int fd_ = -1;
};

// Read-only mapping of a whole file. An empty file maps to an empty span.
class MappedFile {
 public:
  MappedFile() = default;
  explicit MappedFile(const std::string& path);
  ~MappedFile();
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;

  const std::string& path() const { return path_; }
  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  std::span<const uint8_t> bytes() const { return {data_, size_}; }
  // Tell the kernel how the map will be read (MADV_RANDOM for random access, …).
  void advise_random() const;
  void advise_sequential() const;
  // Drops the pages read so far from this process's resident set (they stay in the page cache and
  // come back on the next touch): a pass over a map larger than memory keeps RSS bounded.
  void release_pages() const;

 private:
  std::string path_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

bool file_exists(const std::string& path);
// Exactly `bytes` at `offset` of an open file (pread/pwrite until done; EINTR retried); Error
// naming `path` otherwise, a short read (end of file) included.
void pread_all(int fd, void* out, size_t bytes, uint64_t offset, const std::string& path);
void pwrite_all(int fd, const void* data, size_t bytes, uint64_t offset, const std::string& path);
uint64_t file_size(const std::string& path);             // throws Error when missing
std::string read_file(const std::string& path);           // whole file
void write_file_atomic(const std::string& path, std::string_view contents);
void make_dirs(const std::string& path);                  // mkdir -p
// The temp files a killed writer left: `<name>.tmp-<pid>` in `dir` for a name that `ours` accepts
// and a pid other than this process's (an AtomicFile's temp file outlives its process only when the
// process dies). Removes them (a directory with its contents) and returns their paths. Call it
// holding the directory's DirLock, before any other rank of the job writes there: then no other
// live writer can be in it, and a pid is not asked whether it runs (a killed rank can still be
// dying, or its pid already another process's, when the next run starts).
std::vector<std::string> remove_stale_temp_files(const std::string& dir, bool (*ours)(std::string_view name));
std::string path_join(const std::string& dir, const std::string& name);
std::string base_name(const std::string& path);
std::string dir_name(const std::string& path);
// Glob pattern(s) or directories → sorted file list; a directory yields files whose names match
// `dir_suffix` (empty: every regular file). Throws UsageError when a pattern matches nothing.
std::vector<std::string> expand_inputs(const std::vector<std::string>& patterns,
                                       const std::string& dir_suffix = "");

}  // namespace pretrain
