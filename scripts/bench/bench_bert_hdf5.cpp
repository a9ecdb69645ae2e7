// BERT HDF5 throughput: write N seq-128 records (random token ids < 30522 with a padded tail, masks,
// 20 masked positions), read them back in sequential ranges, then read random single records.
// Prints RESULT lines for scripts/bench (bert_hdf5_peer.py prints the same ones for h5py):
//   RESULT hdf5_write <MB/s> <seconds>            (create .. commit, fsync and rename included)
//   RESULT hdf5_read_seq <MB/s> <seconds>         (open + validate + every record, ranges of 8192)
//   RESULT hdf5_read_random <records/s> <seconds> (single records at uniformly random indices)
// MB = uncompressed bytes of all six datasets / 1e6. Reads come from the page cache.

#include <chrono>
#include <ctime>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "common/common.h"
#include "formats/bert_hdf5.h"
#include "bench_files.h"

using namespace pretrain;

namespace {

constexpr int64_t kSeq = 128, kPredictions = 20, kBatch = 4096;

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Process CPU seconds (all threads): on a shared machine wall time alone hides what work cost.
double cpu_seconds() { return static_cast<double>(std::clock()) / CLOCKS_PER_SEC; }

// Records shaped like create_pretraining_data.py's: [CLS] A [SEP] B [SEP], zero padding after.
BertBatch make_batch(std::mt19937& gen) {
  BertBatch b(kBatch, kSeq, kPredictions);
  for (int64_t i = 0; i < kBatch; ++i) {
    int64_t tokens = 20 + static_cast<int64_t>(gen() % (kSeq - 19));  // short_seq_prob makes short ones
    int64_t split = 1 + static_cast<int64_t>(gen() % static_cast<uint32_t>(tokens - 2));
    for (int64_t j = 0; j < tokens; ++j) {
      b.input_ids[static_cast<size_t>(i * kSeq + j)] = static_cast<int32_t>(gen() % 30522);
      b.input_mask[static_cast<size_t>(i * kSeq + j)] = 1;
      b.segment_ids[static_cast<size_t>(i * kSeq + j)] = j > split;
    }
    int64_t preds = std::min<int64_t>(kPredictions, std::max<int64_t>(1, tokens * 15 / 100));
    int32_t pos = 0;
    for (int64_t k = 0; k < preds; ++k) {
      pos += 1 + static_cast<int32_t>(gen() % static_cast<uint32_t>(std::max<int64_t>(1, (tokens - 1 - pos) / (preds - k))));
      b.masked_lm_positions[static_cast<size_t>(i * kPredictions + k)] = std::min<int32_t>(pos, static_cast<int32_t>(tokens - 1));
      b.masked_lm_ids[static_cast<size_t>(i * kPredictions + k)] = static_cast<int32_t>(gen() % 30522);
    }
    b.next_sentence_labels[static_cast<size_t>(i)] = static_cast<int8_t>(gen() & 1);
  }
  return b;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"BERT HDF5 shard write/read benchmark", "bench_bert_hdf5"};
  int64_t records = 1'000'000, random_reads = 100'000, records_per_chunk = 0;
  ToolOptions common(app);  // --threads caps the writer's and the readers' oneTBB threads
  bench::ScratchFileOptions scratch(app, "bench-bert.hdf5");
  app.add_option("--records", records, "records to write");
  app.add_option("--random", random_reads, "random single-record reads");
  app.add_option("--records-per-chunk", records_per_chunk, "chunk rows (0: the writer's default)");
  return run_tool(app, argc, argv, [&] {
    const std::string path = path_join(scratch.dir, "bench-bert.hdf5");
    const double mb = static_cast<double>(records) * (kSeq * (4 + 1 + 1) + kPredictions * (4 + 4) + 1) / 1e6;
    // Content comes from a pool made in advance, so only the writing is timed.
    std::mt19937 gen(static_cast<uint32_t>(scratch.seed));
    std::vector<BertBatch> pool;
    for (int i = 0; i < 16; ++i) pool.push_back(make_batch(gen));

    auto t0 = std::chrono::steady_clock::now();
    double cpu0 = cpu_seconds();
    {
      BertShardOptions options;
      options.records_per_chunk = records_per_chunk;
      BertShardWriter writer(path, kSeq, kPredictions, options);
      BertBatch tail;
      for (int64_t done = 0, k = 0; done < records; done += kBatch, ++k) {
        const BertBatch& b = pool[static_cast<size_t>(k) % pool.size()];
        if (records - done >= kBatch) {
          writer.append(b);
        } else {
          tail.resize(records - done, kSeq, kPredictions);
          for (int64_t i = 0; i < tail.size; ++i) tail.set(i, b.record(i));
          writer.append(tail);
        }
      }
      writer.commit();
    }
    double write_s = seconds_since(t0);
    std::printf("RESULT hdf5_write %.1f %.3f\n# hdf5_write cpu %.3f s\n", mb / write_s, write_s, cpu_seconds() - cpu0);
    std::printf("# file %s: %.1f MB on disk, %.1f MB of values\n", path.c_str(), static_cast<double>(file_size(path)) / 1e6, mb);
    std::fflush(stdout);

    t0 = std::chrono::steady_clock::now();
    cpu0 = cpu_seconds();
    int64_t checksum = 0;
    {
      BertShardReader reader(path);
      BertBatch b;
      for (int64_t begin = 0; begin < reader.size(); begin += 2 * kBatch) {
        reader.read_range(begin, std::min(2 * kBatch, reader.size() - begin), b);
        checksum += b.input_ids[0] + b.masked_lm_ids.back() + b.input_mask[static_cast<size_t>(b.size * kSeq - 1)];
      }
    }
    double read_s = seconds_since(t0);
    std::printf("RESULT hdf5_read_seq %.1f %.3f\n# hdf5_read_seq cpu %.3f s\n", mb / read_s, read_s, cpu_seconds() - cpu0);
    std::fflush(stdout);

    t0 = std::chrono::steady_clock::now();
    cpu0 = cpu_seconds();
    {
      BertShardReader reader(path);
      BertBatch b;
      std::mt19937_64 pick(scratch.seed + 1);
      for (int64_t k = 0; k < random_reads && records > 0; ++k) {
        reader.read_range(static_cast<int64_t>(pick() % static_cast<uint64_t>(records)), 1, b);
        checksum += b.input_ids[1];
      }
    }
    double random_s = seconds_since(t0);
    std::printf("RESULT hdf5_read_random %.1f %.3f\n# hdf5_read_random cpu %.3f s\n",
                static_cast<double>(random_reads) / random_s, random_s, cpu_seconds() - cpu0);
    std::printf("# checksum %lld\n", static_cast<long long>(checksum));
    if (!scratch.keep) std::remove(path.c_str());
    return 0;
  });
}
