// bench_bz2 FILE [--threads N]: decodes FILE with Bz2Reader into nowhere and prints
//   RESULT bz2_decode <MB/s of decoded output> <seconds>
// Compare with `time lbzip2 -dc -n N FILE > /dev/null`.
// bench_bz2 FILE --blocks [--reference]: every block of FILE (a file from bzip2/lbzip2, one
// stream) decoded one after another on this thread by bz2::decode_block (or by libbz2,
// bz2::decode_block_reference), nothing else; prints
//   RESULT bz2_blocks <ours|libbz2> <decoded MB> <CPU seconds> <MB per CPU-second>
// Compare with the user+sys time of `bzip2 -dc FILE > /dev/null`.
#include <sys/resource.h>
#include <tbb/global_control.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "common/file.h"
#include "formats/bz2_parallel.h"
#include "formats/bz2_scan.h"

namespace {

double cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) + (u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

int decode_blocks(const std::string& path, bool reference) {
  namespace bz2 = pretrain::bz2;
  std::string file = pretrain::read_file(path);
  std::span<const uint8_t> bytes(reinterpret_cast<const uint8_t*>(file.data()), file.size());
  int level = file.size() > 4 && file[3] >= '1' && file[3] <= '9' ? file[3] - '0' : 9;
  double start = cpu_seconds();
  uint64_t out = 0, blocks = 0;
  bz2::Magic m = bz2::find_magic(bytes, 0);
  while (m.kind == bz2::MagicKind::block) {
    bz2::Magic next = bz2::find_magic(bytes, m.bit + 48);
    bz2::BitRange r{bytes, m.bit, next.kind == bz2::MagicKind::none ? file.size() * 8 : next.bit};
    bz2::BlockResult b = reference ? bz2::decode_block_reference({&r, 1}, level) : bz2::decode_block({&r, 1}, level);
    if (!b.ok) {
      std::fprintf(stderr, "error: block at bit %llu: %s\n", static_cast<unsigned long long>(m.bit), b.error.c_str());
      return 1;
    }
    out += b.decoded.size();
    ++blocks;
    m = next;
  }
  double cpu = cpu_seconds() - start;
  std::printf("RESULT bz2_blocks %s %.1f %.3f %.1f\n", reference ? "libbz2" : "ours", out / 1e6, cpu, out / 1e6 / cpu);
  std::fprintf(stderr, "%s: %llu blocks\n", path.c_str(), static_cast<unsigned long long>(blocks));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string path;
  int threads = 0;
  bool blocks = false, reference = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--threads") == 0 && i + 1 < argc) threads = std::atoi(argv[++i]);
    else if (std::strcmp(argv[i], "--blocks") == 0) blocks = true;
    else if (std::strcmp(argv[i], "--reference") == 0) reference = true;
    else path = argv[i];
  }
  if (blocks && !path.empty()) return decode_blocks(path, reference);
  if (path.empty()) {
    std::fprintf(stderr, "usage: bench_bz2 FILE [--threads N] | FILE --blocks [--reference]\n");
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
