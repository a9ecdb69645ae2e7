#include "common/file.h"

#include <fcntl.h>
#include <glob.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "common/error.h"

namespace pretrain {

namespace fs = std::filesystem;
static constexpr size_t kBufferBytes = 1 << 20;

// write(2) may write less than asked (a signal, a pipe, a quota): loop until all of it is out.
static void write_fully(int fd, const char* p, size_t n, const std::string& path) {
  while (n) {
    ssize_t w = ::write(fd, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      throw_errno("write failed", path);
    }
    p += w;
    n -= static_cast<size_t>(w);
  }
}

// A path that exists and is neither a regular file nor a directory: /dev/null, a FIFO, a terminal.
// Renaming a temp file onto it would replace the device with a plain file (run as root, `-o
// /dev/null` would break /dev/null for the whole machine), so such outputs are written in place.
static bool is_special_file(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return false;
  return !S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode);
}

AtomicFile::AtomicFile(std::string path, bool open_fd)
    : path_(std::move(path)), tmp_path_(cat(path_, ".tmp-", ::getpid())), direct_(is_special_file(path_)) {
  if (direct_) tmp_path_ = path_;
  if (open_fd) {
    fd_ = direct_ ? ::open(path_.c_str(), O_WRONLY | O_CLOEXEC)
                  : ::open(tmp_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd_ < 0) throw_errno("cannot create", tmp_path_);
  }
}

AtomicFile AtomicFile::resumable(std::string path, uint64_t keep) {
  AtomicFile f(path, path + ".partial");
  f.keep_ = true;
  f.fd_ = ::open(f.tmp_path_.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  if (f.fd_ < 0) throw_errno("cannot open", f.tmp_path_);
  struct stat st {};
  if (::fstat(f.fd_, &st) != 0) throw_errno("cannot stat", f.tmp_path_);
  if (static_cast<uint64_t>(st.st_size) < keep)
    throw Error(Where{f.tmp_path_}, cat("expected at least ", keep, " bytes to continue from, found ", st.st_size));
  if (::ftruncate(f.fd_, static_cast<off_t>(keep)) != 0) throw_errno("cannot truncate", f.tmp_path_);
  if (::lseek(f.fd_, 0, SEEK_END) < 0) throw_errno("cannot seek", f.tmp_path_);
  f.written_ = keep;
  return f;
}

AtomicFile::AtomicFile(AtomicFile&& o) noexcept
    : path_(std::move(o.path_)), tmp_path_(std::move(o.tmp_path_)), fd_(o.fd_), done_(o.done_), keep_(o.keep_),
      direct_(o.direct_), written_(o.written_), buffer_(std::move(o.buffer_)) {
  o.fd_ = -1;
  o.done_ = true;
}

AtomicFile::~AtomicFile() {
  if (done_) return;
  if (!keep_) {
    abandon();
  } else if (fd_ >= 0) {
    ::close(fd_);  // what was flushed stays for the next run; the rest was never promised
  }
}

void AtomicFile::write(const void* data, size_t n) {
  if (fd_ < 0) throw Error(Where{tmp_path_}, "write on a file that is not open");
  written_ += n;
  if (buffer_.size() + n <= kBufferBytes) {  // the buffer grows as needed: a manifest maps no megabyte
    buffer_.insert(buffer_.end(), static_cast<const char*>(data), static_cast<const char*>(data) + n);
    return;
  }
  flush();
  if (n >= kBufferBytes) {  // large writes go straight through
    write_fully(fd_, static_cast<const char*>(data), n, tmp_path_);
  } else {
    buffer_.insert(buffer_.end(), static_cast<const char*>(data), static_cast<const char*>(data) + n);
  }
}

void AtomicFile::flush() {
  write_fully(fd_, buffer_.data(), buffer_.size(), tmp_path_);
  buffer_.clear();
}

static void fsync_path(const std::string& path, int flags) {
  int fd = ::open(path.c_str(), flags | O_CLOEXEC);
  if (fd < 0) throw_errno("cannot open for fsync", path);
  ::fsync(fd);
  ::close(fd);
}

void AtomicFile::commit() {
  if (done_) throw Error(Where{path_}, "commit() called twice");
  if (direct_) {  // nothing to rename, and a device need not support fsync
    if (fd_ >= 0) {
      flush();
      ::close(fd_);
      fd_ = -1;
    }
    done_ = true;
    return;
  }
  if (fd_ >= 0) {
    flush();
    if (::fsync(fd_) != 0) throw_errno("fsync failed", tmp_path_);
    ::close(fd_);
    fd_ = -1;
  } else {
    fsync_path(tmp_path_, O_RDONLY);
  }
  if (::rename(tmp_path_.c_str(), path_.c_str()) != 0) throw_errno("cannot rename onto", path_);
  done_ = true;
  std::string dir = dir_name(path_);
  fsync_path(dir.empty() ? "." : dir, O_RDONLY | O_DIRECTORY);
}

void AtomicFile::abandon() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  if (!direct_) ::unlink(tmp_path_.c_str());
  done_ = true;
}

DirLock::DirLock(const std::string& dir) : path_(path_join(dir, kFileName)) {
  make_dirs(dir);
  for (;;) {
    fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd_ < 0) throw_errno("cannot create the lock file", path_);
    if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
      const int err = errno;
      ::close(fd_);
      fd_ = -1;
      if (err == EINTR) continue;
      if (err != EWOULDBLOCK) {
        errno = err;
        throw_errno("cannot lock", path_);
      }
      std::string holder;
      try {
        holder = read_file(path_);
      } catch (const Error&) {
      }
      while (!holder.empty() && (holder.back() == '\n' || holder.back() == ' ')) holder.pop_back();
      throw Error(Where{dir}, cat("the output directory is in use by another process (pid ",
                                  holder.empty() ? "unknown" : holder, ", holding ", path_,
                                  "): two runs would interleave their files; wait for it or write elsewhere"));
    }
    // The last holder removes the file before it lets go: when that happened between our open and
    // our flock, we hold a name nobody else sees. Then lock the file the name has now.
    struct stat held {}, named {};
    if (::fstat(fd_, &held) == 0 && ::stat(path_.c_str(), &named) == 0 && held.st_dev == named.st_dev &&
        held.st_ino == named.st_ino)
      break;
    ::close(fd_);
    fd_ = -1;
  }
  const std::string pid = cat(::getpid(), "\n");
  if (::ftruncate(fd_, 0) != 0 || ::pwrite(fd_, pid.data(), pid.size(), 0) != ssize_t(pid.size())) {
    const int err = errno;
    ::close(fd_);  // no destructor runs for a constructor that throws
    errno = err;
    throw_errno("cannot write the lock file", path_);
  }
}

DirLock::DirLock(DirLock&& o) noexcept : path_(std::move(o.path_)), fd_(o.fd_) { o.fd_ = -1; }

DirLock::~DirLock() {
  if (fd_ < 0) return;
  ::unlink(path_.c_str());  // while still held: nobody can take the old file's lock and keep it
  ::close(fd_);
}

MappedFile::MappedFile(const std::string& path) : path_(path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw_errno("cannot open", path);
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    ::close(fd);
    throw_errno("cannot stat", path);
  }
  size_ = static_cast<size_t>(st.st_size);
  if (size_ > 0) {
    void* p = ::mmap(nullptr, size_, PROT_READ, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
      ::close(fd);
      throw_errno("cannot mmap", path);
    }
    data_ = static_cast<const uint8_t*>(p);
  }
  ::close(fd);
}

MappedFile::~MappedFile() {
  if (data_) ::munmap(const_cast<uint8_t*>(data_), size_);
}

MappedFile::MappedFile(MappedFile&& o) noexcept : path_(std::move(o.path_)), data_(o.data_), size_(o.size_) {
  o.data_ = nullptr;
  o.size_ = 0;
}

MappedFile& MappedFile::operator=(MappedFile&& o) noexcept {
  if (this != &o) {
    if (data_) ::munmap(const_cast<uint8_t*>(data_), size_);
    path_ = std::move(o.path_);
    data_ = o.data_;
    size_ = o.size_;
    o.data_ = nullptr;
    o.size_ = 0;
  }
  return *this;
}

void MappedFile::advise_random() const {
  if (data_) ::madvise(const_cast<uint8_t*>(data_), size_, MADV_RANDOM);
}
void MappedFile::advise_sequential() const {
  if (data_) ::madvise(const_cast<uint8_t*>(data_), size_, MADV_SEQUENTIAL);
}
void MappedFile::release_pages() const {
  if (data_) ::madvise(const_cast<uint8_t*>(data_), size_, MADV_DONTNEED);
}

void pread_all(int fd, void* out, size_t bytes, uint64_t offset, const std::string& path) {
  char* p = static_cast<char*>(out);
  while (bytes) {
    ssize_t got = ::pread(fd, p, bytes, static_cast<off_t>(offset));
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) throw_errno("cannot read", path);
    p += got, bytes -= static_cast<size_t>(got), offset += static_cast<uint64_t>(got);
  }
}

void pwrite_all(int fd, const void* data, size_t bytes, uint64_t offset, const std::string& path) {
  const char* p = static_cast<const char*>(data);
  while (bytes) {
    ssize_t put = ::pwrite(fd, p, bytes, static_cast<off_t>(offset));
    if (put < 0 && errno == EINTR) continue;
    if (put <= 0) throw_errno("cannot write", path);
    p += put, bytes -= static_cast<size_t>(put), offset += static_cast<uint64_t>(put);
  }
}

bool file_exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

uint64_t file_size(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) throw_errno("cannot stat", path);
  return static_cast<uint64_t>(st.st_size);
}

std::string read_file(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw_errno("cannot open", path);
  std::string out;
  char buf[1 << 16];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      ::close(fd);
      throw_errno("read failed", path);
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return out;
}

void write_file_atomic(const std::string& path, std::string_view contents) {
  AtomicFile f(path);
  f.write(contents);
  f.commit();
}

void make_dirs(const std::string& path) {
  std::error_code ec;
  fs::create_directories(path, ec);
  if (ec) throw Error(Where{path}, "cannot create directory: " + ec.message());
}

std::vector<std::string> remove_stale_temp_files(const std::string& dir, bool (*ours)(std::string_view name)) {
  std::vector<std::string> removed;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string file = entry.path().filename().string();
    const size_t at = file.rfind(".tmp-");
    if (at == std::string::npos || at + 5 == file.size()) continue;
    const std::string pid = file.substr(at + 5);
    if (pid.find_first_not_of("0123456789") != std::string::npos || pid.size() > 9) continue;
    if (!ours(std::string_view(file).substr(0, at)) || std::stol(pid) == long(::getpid())) continue;
    if (fs::remove_all(entry.path(), ec) > 0) removed.push_back(entry.path().string());  // a checkpoint's is a directory
  }
  return removed;
}

std::string path_join(const std::string& dir, const std::string& name) {
  if (dir.empty() || (!name.empty() && name[0] == '/')) return name;
  return dir.back() == '/' ? dir + name : dir + "/" + name;
}

std::string base_name(const std::string& path) { return fs::path(path).filename().string(); }

std::string dir_name(const std::string& path) { return fs::path(path).parent_path().string(); }

std::vector<std::string> expand_inputs(const std::vector<std::string>& patterns, const std::string& dir_suffix) {
  std::vector<std::string> out;
  for (const std::string& pattern : patterns) {
    std::vector<std::string> matched;
    std::error_code ec;
    if (fs::is_directory(pattern, ec)) {
      for (const auto& entry : fs::recursive_directory_iterator(pattern, ec)) {
        if (!entry.is_regular_file()) continue;
        std::string p = entry.path().string();
        if (p.find(".tmp-") != std::string::npos) continue;  // someone's unfinished output
        if (dir_suffix.empty() || (p.size() >= dir_suffix.size() &&
                                   p.compare(p.size() - dir_suffix.size(), dir_suffix.size(), dir_suffix) == 0))
          matched.push_back(p);
      }
    } else {
      glob_t g{};
      if (::glob(pattern.c_str(), GLOB_NOSORT, nullptr, &g) == 0)
        for (size_t i = 0; i < g.gl_pathc; ++i) matched.push_back(g.gl_pathv[i]);
      globfree(&g);
    }
    if (matched.empty()) throw UsageError(Where{pattern}, "no input files match");
    std::sort(matched.begin(), matched.end());
    out.insert(out.end(), matched.begin(), matched.end());
  }
  return out;
}

}  // namespace pretrain
