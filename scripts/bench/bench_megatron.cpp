// Megatron .bin/.idx throughput: write N uint16 tokens in documents of realistic sizes (1-8
// sequences of 20-2000 tokens), read them all back through spans, then look up random spans.
// Prints RESULT lines for scripts/bench (megatron_peer.py prints the same ones for numpy):
//   RESULT megatron_write <MB/s of .bin> <seconds>       (finalize's fsync and rename included)
//   RESULT megatron_read_seq <MB/s> <seconds>           (open + validate + sum every token)
//   RESULT megatron_random_spans <spans/s> <seconds>    (sequence(i) for random i, first token)
// Reads come from the page cache (the file was just written; dropping caches needs root).
#include <chrono>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "common/common.h"
#include "formats/megatron.h"
#include "bench_files.h"

using namespace pretrain;

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// splitmix64: a cheap generator so the lengths cost nothing next to the writing.
struct Rng {
  uint64_t s;
  uint64_t next() {
    uint64_t z = (s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  uint64_t below(uint64_t n) { return next() % n; }
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Megatron indexed dataset write/read benchmark", "bench_megatron"};
  uint64_t tokens = 500'000'000, spans = 10'000'000;
  bench::ScratchFileOptions scratch(app, "bench-megatron.{bin,idx}");
  app.add_option("--tokens", tokens, "tokens to write (uint16)");
  app.add_option("--spans", spans, "random sequence lookups");
  return run_tool(app, argc, argv, [&] {
    const std::string prefix = path_join(scratch.dir, "bench-megatron");
    // Token content comes from a pool made in advance, so only writing is timed.
    std::vector<uint16_t> pool(1 << 24);
    std::mt19937 gen{uint32_t(scratch.seed)};
    for (auto& t : pool) t = uint16_t(gen() % 50257);
    Rng rng{scratch.seed};

    auto t0 = std::chrono::steady_clock::now();
    double streamed_s = 0;
    {
      MegatronWriter w(prefix, MegatronDType::u16);
      uint64_t written = 0;
      while (written < tokens) {
        for (uint64_t s = 1 + rng.below(8); s && written < tokens; --s) {
          const uint64_t n = std::min<uint64_t>(20 + rng.below(1981), tokens - written);
          const size_t at = rng.below(pool.size() - n);
          w.add_sequence(std::span<const uint16_t>(pool.data() + at, n));
          written += n;
        }
        w.end_document();
      }
      streamed_s = seconds_since(t0);
      w.finalize();
    }
    const double write_s = seconds_since(t0);
    const double mb = double(tokens) * 2 / 1e6;
    std::printf("RESULT megatron_write %.1f %.3f\n", mb / write_s, write_s);
    std::fflush(stdout);
    std::fprintf(stderr, "  before finalize: %.3f s (%.1f MB/s); finalize (index, fsync, rename): %.3f s\n",
                 streamed_s, mb / streamed_s, write_s - streamed_s);

    t0 = std::chrono::steady_clock::now();
    MegatronReader r(prefix);
    const double open_s = seconds_since(t0);
    r.advise_sequential();
    uint64_t sum = 0;
    for (size_t i = 0; i < r.num_sequences(); ++i)
      for (uint16_t t : r.sequence(i).as<uint16_t>()) sum += t;
    const double read_s = seconds_since(t0);
    std::printf("RESULT megatron_read_seq %.1f %.3f\n", mb / read_s, read_s);
    std::fflush(stdout);
    std::fprintf(stderr, "  %zu sequences, %zu documents; open+validate %.3f s; token sum %llu\n",
                 r.num_sequences(), r.num_documents(), open_s, static_cast<unsigned long long>(sum));

    // The indices are drawn before the clock starts, as the numpy peer does.
    r.advise_random();
    std::vector<uint32_t> picks(r.num_sequences() ? spans : 0);
    for (auto& i : picks) i = uint32_t(rng.below(r.num_sequences()));
    uint64_t first_sum = 0;
    t0 = std::chrono::steady_clock::now();
    for (uint32_t i : picks) first_sum += r.sequence(i).as<uint16_t>()[0];
    const double random_s = seconds_since(t0);
    std::printf("RESULT megatron_random_spans %.0f %.3f\n", double(spans) / random_s, random_s);
    std::fflush(stdout);
    std::fprintf(stderr, "  first-token sum %llu (reads are from the page cache)\n",
                 static_cast<unsigned long long>(first_sum));

    if (!scratch.keep) {
      std::remove(megatron_bin_path(prefix).c_str());
      std::remove(megatron_idx_path(prefix).c_str());
    }
    return 0;
  });
}
