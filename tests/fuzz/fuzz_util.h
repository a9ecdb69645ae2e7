// For fuzz targets whose readers open files by name: the input goes to per-process scratch files,
// written plainly (write_file_atomic would fsync every input) and removed at exit.
#pragma once
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

namespace pretrain::fuzz {

// "/tmp/fuzz-<name>-<pid>" + suffix, unlinked when the process exits.
class ScratchFile {
 public:
  ScratchFile(const std::string& name, const std::string& suffix)
      : path_("/tmp/fuzz-" + name + "-" + std::to_string(::getpid()) + suffix) {}
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
