// zlib against libdeflate and ISA-L on real BERT shard chunks: every file's records cut into chunks
// as our writer cuts them (each dataset's rows, ~256 KiB of input_ids per chunk), each chunk
// deflated by every codec at every gzip level asked for, and inflated by every codec from zlib's
// level-4 streams (what NVIDIA's files hold) and from each codec's own. One thread; CPU seconds of
// that thread, so a busy machine distorts little. --shuffle first byte-transposes each int32
// chunk as HDF5's shuffle filter does (what h5py's shuffle=True writes before gzip; the int8 ones
// are left as they are), to measure what that filter would give. Prints RESULT lines for
// scripts/bench/deflate.sh:
//   RESULT deflate <codec> <gzip level> <library level> <input MB> <CPU s> <output bytes>
//   RESULT inflate <codec> <streams' codec> <gzip level> <output MB> <CPU s>
// MB = uncompressed chunk bytes / 1e6.
#include <CLI/CLI.hpp>
#include <time.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "formats/bert_hdf5.h"
#include "formats/bert_hdf5_layout.h"
#include "formats/deflate.h"

using namespace pretrain;
using deflate::Codec;

namespace {

constexpr Codec kCodecs[] = {Codec::zlib, Codec::libdeflate, Codec::isal};

double thread_cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
}

using Chunk = std::vector<uint8_t>;

// HDF5's shuffle filter: byte k of every element goes to plane k, planes one after another.
Chunk shuffled(const Chunk& chunk, size_t elem) {
  const size_t n = chunk.size() / elem;
  Chunk out(chunk.size());
  for (size_t i = 0; i < n; ++i)
    for (size_t b = 0; b < elem; ++b) out[b * n + i] = chunk[i * elem + b];
  return out;
}

// Each file's datasets in chunks of `rows_per_chunk` records (0: our writer's default rows),
// shuffled when `shuffle`.
std::vector<Chunk> load_chunks(const std::vector<std::string>& files, int64_t rows_per_chunk, bool shuffle) {
  std::vector<Chunk> chunks;
  for (const auto& path : files) {
    BertShardReader reader(path);
    BertBatch all;
    reader.read_range(0, reader.size(), all);
    const int64_t rows = rows_per_chunk > 0 ? rows_per_chunk : std::max<int64_t>(1, (256 << 10) / (all.seq_len * 4));
    for (size_t c = 0; c < bert_hdf5::column_count(all.max_pack); ++c) {
      const auto& col = bert_hdf5::kColumns[c];
      const size_t row_bytes =
          static_cast<size_t>(bert_hdf5::column_width(col, all.seq_len, all.max_predictions, all.max_pack)) * col.elem;
      const uint8_t* data = bert_hdf5::column_data(all, c);
      for (int64_t r = 0; r < all.size; r += rows) {
        // A last, short chunk is zero-padded to full size, as HDF5 stores it.
        Chunk chunk(static_cast<size_t>(rows) * row_bytes, 0);
        std::memcpy(chunk.data(), data + static_cast<size_t>(r) * row_bytes,
                    static_cast<size_t>(std::min(rows, all.size - r)) * row_bytes);
        chunks.push_back(shuffle && col.elem > 1 ? shuffled(chunk, col.elem) : std::move(chunk));
      }
    }
  }
  return chunks;
}

struct Streams {
  std::vector<Chunk> data;
  std::vector<size_t> size;
};

// Deflates every chunk `runs` times; prints the best run's CPU time.
Streams deflate_all(const std::vector<Chunk>& chunks, Codec codec, int level, int runs, double mb) {
  Streams s;
  s.data.resize(chunks.size());
  s.size.resize(chunks.size());
  double best = 1e30;
  for (int run = 0; run < runs; ++run) {
    double t0 = thread_cpu_seconds();
    for (size_t i = 0; i < chunks.size(); ++i)
      s.size[i] = deflate::compress(codec, chunks[i].data(), chunks[i].size(), level, s.data[i]);
    best = std::min(best, thread_cpu_seconds() - t0);
  }
  size_t total = 0;
  for (size_t n : s.size) total += n;
  std::printf("RESULT deflate %s %d %d %.3f %.4f %zu\n", deflate::codec_name(codec), level,
              deflate::library_level(codec, level), mb, best, total);
  return s;
}

void inflate_all(const std::vector<Chunk>& chunks, const Streams& s, Codec codec, Codec from, int level, int runs,
                 double mb) {
  std::vector<uint8_t> out;
  double best = 1e30;
  for (int run = 0; run < runs; ++run) {
    double t0 = thread_cpu_seconds();
    for (size_t i = 0; i < chunks.size(); ++i) {
      out.resize(chunks[i].size());
      deflate::inflate(codec, s.data[i].data(), s.size[i], out.data(), out.size(), Where{"bench"}, "chunk");
      if (run == 0 && out != chunks[i]) throw Error(cat(deflate::codec_name(codec), " inflated chunk ", i, " wrong"));
    }
    best = std::min(best, thread_cpu_seconds() - t0);
  }
  std::printf("RESULT inflate %s %s %d %.3f %.4f\n", deflate::codec_name(codec), deflate::codec_name(from), level, mb,
              best);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"zlib, libdeflate and ISA-L on BERT shard chunks"};
  std::vector<std::string> files;
  std::vector<int> levels = {1, 2, 3, 4, 5, 6};
  int runs = 3;
  int64_t rows_per_chunk = 0;
  bool shuffle = false;
  app.add_option("files", files, "BERT HDF5 shards")->required();
  app.add_option("--levels", levels, "gzip levels to deflate at");
  app.add_option("--runs", runs, "runs of each case (the fastest counts)");
  app.add_option("--rows-per-chunk", rows_per_chunk, "records per chunk (0: our writer's default)");
  app.add_flag("--shuffle", shuffle, "byte-shuffle int32 chunks first (HDF5's shuffle filter)");
  CLI11_PARSE(app, argc, argv);
  try {
    const std::vector<Chunk> chunks = load_chunks(files, rows_per_chunk, shuffle);
    size_t bytes = 0;
    for (const auto& c : chunks) bytes += c.size();
    const double mb = static_cast<double>(bytes) / 1e6;
    std::fprintf(stderr, "# %zu chunks, %.1f MB\n", chunks.size(), mb);
    for (Codec codec : kCodecs)
      for (int level : levels) {
        Streams s = deflate_all(chunks, codec, level, runs, mb);
        // Inflate speed from zlib's gzip-4 streams (NVIDIA's files) and from each codec's own at 4.
        if (level == 4)
          for (Codec in : kCodecs) inflate_all(chunks, s, in, codec, level, runs, mb);
      }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
