// Helpers for our GoogleTest suites: the shared real data (skip when absent), temp directories.
#pragma once
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <random>
#include <string>

#include "common/error.h"

namespace pretrain::testing {

// What the pretrain::Error that f() throws says, or "(no error)": for tests that check a message
// names the file and the entry.
template <typename F>
std::string error_message(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

// Where the sources, the build and the shared data are, as configured (tests/test_util_paths.cpp:
// compiled there alone, so no test's object depends on the build directory's path and ccache
// shares them between build directories).
std::string source_dir();
std::string build_dir();
std::string default_shared_data_dir();

// ../shared/data, or $PRETRAIN_SHARED_DATA; empty when it does not exist.
inline std::string shared_data_dir() {
  const char* env = std::getenv("PRETRAIN_SHARED_DATA");
  std::string dir = env && *env ? env : default_shared_data_dir();
  return std::filesystem::is_directory(dir) ? dir : std::string();
}

// Path of a file under shared data, or "" (and the test should skip).
inline std::string shared_file(const std::string& rel) {
  std::string dir = shared_data_dir();
  if (dir.empty()) return {};
  std::string p = dir + "/" + rel;
  return std::filesystem::exists(p) ? p : std::string();
}

#define PRETRAIN_REQUIRE_SHARED(var, rel)                                        \
  std::string var = ::pretrain::testing::shared_file(rel);                       \
  if (var.empty()) GTEST_SKIP() << "shared data file " << (rel) << " not found " \
                                << "(set PRETRAIN_SHARED_DATA)"


// A fresh directory under $TMPDIR, removed with everything in it.
class TempDir {
 public:
  TempDir() {
    std::random_device rd;
    path_ = std::filesystem::temp_directory_path() /
            ("pretrain-test-" + std::to_string(::getpid()) + "-" + std::to_string(rd()));
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string path() const { return path_.string(); }
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

}  // namespace pretrain::testing
