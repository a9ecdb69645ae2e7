// For fuzz targets whose readers open files by name: the input goes to per-process scratch files,
// written plainly (write_file_atomic would fsync every input) and removed at exit. They live in
// /dev/shm where there is one: a target whose code under test commits outputs (fsync, rename)
// spent most of its time in disk I/O on /tmp, and tmpfs makes fsync free.
#pragma once
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

namespace pretrain::fuzz {

// "/dev/shm" when it is a writable directory, else "/tmp".
inline const std::string& scratch_dir() {
  static const std::string dir = ::access("/dev/shm", W_OK | X_OK) == 0 ? "/dev/shm" : "/tmp";
  return dir;
}

// "<scratch_dir>/fuzz-<name>-<pid>" + suffix, unlinked when the process exits.
class ScratchFile {
 public:
  ScratchFile(const std::string& name, const std::string& suffix)
      : path_(scratch_dir() + "/fuzz-" + name + "-" + std::to_string(::getpid()) + suffix) {}
  ~ScratchFile() { ::unlink(path_.c_str()); }
  ScratchFile(const ScratchFile&) = delete;
  ScratchFile& operator=(const ScratchFile&) = delete;

  const std::string& path() const { return path_; }
  void write(std::string_view bytes) const {
    std::FILE* f = std::fopen(path_.c_str(), "wb");
    if (!f) std::abort();
    if (!bytes.empty() && std::fwrite(bytes.data(), 1, bytes.size(), f) != bytes.size()) std::abort();
    std::fclose(f);
  }

 private:
  std::string path_;
};

}  // namespace pretrain::fuzz
