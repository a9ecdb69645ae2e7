// bench_bz2 FILE [--threads N]: decodes FILE with Bz2Reader into nowhere and prints
//   RESULT bz2_decode <MB/s of decoded output> <seconds>
// Compare with `time lbzip2 -dc -n N FILE > /dev/null`.
#include <tbb/global_control.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "formats/bz2_parallel.h"

int main(int argc, char** argv) {
  std::string path;
  int threads = 0;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--threads") == 0 && i + 1 < argc) threads = std::atoi(argv[++i]);
    else path = argv[i];
  }
  if (path.empty()) {
    std::fprintf(stderr, "usage: bench_bz2 FILE [--threads N]\n");
    return 2;
  }
  if (threads <= 0) threads = static_cast<int>(tbb::global_control::active_value(tbb::global_control::max_allowed_parallelism));
  tbb::global_control limit(tbb::global_control::max_allowed_parallelism, static_cast<size_t>(threads));
  try {
    auto start = std::chrono::steady_clock::now();
    pretrain::Bz2Reader reader(path, {.threads = threads});
    uint64_t bytes = 0;
    reader.for_each_piece([&](std::string_view piece) { bytes += piece.size(); });
    double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::printf("RESULT bz2_decode %.1f %.3f\n", static_cast<double>(bytes) / 1e6 / seconds, seconds);
    std::fprintf(stderr, "%s: %llu bytes decoded, %llu blocks, %llu streams, %d threads\n", path.c_str(),
                 static_cast<unsigned long long>(bytes), static_cast<unsigned long long>(reader.blocks()),
                 static_cast<unsigned long long>(reader.streams()), threads);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
