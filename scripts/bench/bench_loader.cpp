// Loader throughput and consumer wait: BERT batches from HDF5 shards or GPT batches from
// Megatron .bin/.idx, on the CPU, with a given number of workers. Two runs, each on a new Loader:
//   throughput: next() as fast as the consumer can take them, over --samples samples (0: one
//     epoch). Timed from before the Loader is built (indices, first window) to the last batch, as
//     loader_peer.py times the PyTorch and numpy paths.
//   paced: the consumer sleeps --step-ms after every batch (a fast GPU step) for --paced-batches
//     batches; how long next() kept it waiting. The first batch (start-up: index building, the first
//     BERT window) is left out of the mean and reported on its own.
// Prints RESULT lines for scripts/bench/loader.sh (loader_peer.py prints the same ones):
//   RESULT ours_<kind> <workers> <samples/s> <seconds> <samples>
//   RESULT ours_<kind>_paced <workers> <wait ms/batch> <share of batches that waited> <batches> <first batch ms>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "common/common.h"
#include "loader/loader.h"

using namespace pretrain;

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// Reads one id per row so every batch is looked at, as a trainer would (the peers' tensors are
// built whole too); the sum is printed so the compiler keeps the loads.
uint64_t touch(const Batch& b) {
  const Tensor& t = b.kind == ModelKind::bert ? b.input_ids : b.tokens;
  uint64_t sum = 0;
  for (int64_t r = 0; r < t.shape[0]; ++r) {
    const size_t at = size_t(r * t.shape[1]) * dtype_size(t.dtype);
    const auto* p = static_cast<const uint8_t*>(t.data) + at;
    sum += t.dtype == TensorDType::i64 ? *reinterpret_cast<const int64_t*>(p) : *reinterpret_cast<const int32_t*>(p);
  }
  return sum;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Loader throughput and paced-consumer wait on the CPU", "bench_loader"};
  std::string kind = "bert";
  LoaderConfig config;
  config.device = "cpu";
  uint64_t samples = 0, paced_batches = 0;
  double step_ms = 5;
  app.add_option("--kind", kind, "bert or gpt")->check(CLI::IsMember({"bert", "gpt"}))->capture_default_str();
  app.add_option("--source", config.sources, "shards: manifest, directory, files, Megatron prefix")->required();
  app.add_option("--batch", config.batch_size, "samples per batch")->capture_default_str();
  app.add_option("--seq-len", config.seq_len, "GPT: tokens per sample (BERT: the shards')")->capture_default_str();
  app.add_option("--workers", config.workers, "loader worker threads")->capture_default_str();
  app.add_option("--prefetch", config.prefetch, "batches in flight")->capture_default_str();
  app.add_option("--seed", config.seed)->capture_default_str();
  app.add_option("--samples", samples, "throughput run: samples to take (0: one epoch)")->capture_default_str();
  app.add_option("--step-ms", step_ms, "paced run: consumer's time per batch")->capture_default_str();
  app.add_option("--paced-batches", paced_batches, "paced run: batches (0: no paced run)")->capture_default_str();
  return run_tool(app, argc, argv, [&] {
    config.kind = kind == "gpt" ? ModelKind::gpt : ModelKind::bert;
    // int32 ids: what the CPU path hands a trainer; the peers give int64 (torch's default).
    uint64_t sum = 0;

    {  // Throughput over one epoch (or --samples).
      config.epochs = 1;
      const auto t0 = Clock::now();
      Loader loader(config);
      const double build_s = seconds_since(t0);
      const uint64_t want = samples ? samples : loader.samples_per_epoch();
      uint64_t got = 0;
      while (got < want) {
        std::optional<Batch> b = loader.next();
        if (!b) break;
        sum += touch(*b);
        got += uint64_t(b->size);
      }
      const double s = seconds_since(t0);
      const LoaderStats st = loader.stats();
      std::printf("RESULT ours_%s %d %.1f %.3f %llu\n", kind.c_str(), config.workers, double(got) / s, s,
                  static_cast<unsigned long long>(got));
      std::fflush(stdout);
      std::fprintf(stderr,
                   "  built in %.3f s; %llu of %llu samples/epoch; from the first next(): %.0f samples/s, "
                   "waited %.3f ms/batch; workers read+collate %.3f s\n",
                   build_s, static_cast<unsigned long long>(got),
                   static_cast<unsigned long long>(loader.samples_per_epoch()), st.samples_per_second,
                   st.wait_ms_per_batch, st.read_seconds);
    }

    if (paced_batches > 1) {  // The consumer at a fast GPU's pace.
      config.epochs = 0;  // runs across epoch ends when --paced-batches asks for more than one
      const auto step = std::chrono::duration<double, std::milli>(step_ms);
      const auto t0 = Clock::now();
      Loader loader(config);
      std::optional<Batch> first = loader.next();
      const double first_ms = seconds_since(t0) * 1e3;
      if (!first) throw Error("no batches to pace: the sources hold less than one batch");
      sum += touch(*first);
      first.reset();  // its slot goes back to the ring, as a trainer's step would release it
      std::this_thread::sleep_for(step);
      const LoaderStats after_first = loader.stats();
      // "Waited": next() took longer than taking a ready slot does (microseconds); 0.1 ms is far
      // above that and far below a step.
      uint64_t waited = 0, batches = 1;
      while (batches < paced_batches) {
        const auto w0 = Clock::now();
        std::optional<Batch> b = loader.next();
        if (seconds_since(w0) > 1e-4) ++waited;
        if (!b) continue;  // an epoch boundary: the next call starts the next epoch
        sum += touch(*b);
        b.reset();
        ++batches;
        std::this_thread::sleep_for(step);
      }
      const LoaderStats st = loader.stats();
      const double wait_ms = (st.wait_seconds - after_first.wait_seconds) * 1e3 / double(batches - 1);
      std::printf("RESULT ours_%s_paced %d %.4f %.4f %llu %.1f\n", kind.c_str(), config.workers, wait_ms,
                  double(waited) / double(batches - 1), static_cast<unsigned long long>(batches), first_ms);
      std::fflush(stdout);
      std::fprintf(stderr, "  paced at %.1f ms/step: %.0f samples/s consumed, loader wait %.3f ms/batch overall\n",
                   step_ms, st.samples_per_second, st.wait_ms_per_batch);
    }
    std::fprintf(stderr, "  checksum %llu\n", static_cast<unsigned long long>(sum));
    return 0;
  });
}
