// Tokenizer throughput on real text: every line of --text encoded by our tokenizer (or, with
// --spm-direct, by libsentencepiece's processor called directly — the peer for our wrapper).
// Prints, for scripts/bench/tokenizers.sh (tokenizers_peer.py prints the same for HF/tiktoken):
//   RESULT <case> <tokens/s> <seconds> <tokens> <cpu seconds>
// (cpu seconds: user + system of the best run, for ratios on a shared machine)
// Each run loads a fresh tokenizer, so a word cache starts cold; the best of --runs is reported
// (the machine is shared: the best run is the one least disturbed).
#include <sys/resource.h>

#include <chrono>
#include <fstream>
#include <string>
#include <vector>

#include <sentencepiece_processor.h>
#include <tbb/global_control.h>
#include <tbb/parallel_for.h>

#include "common/common.h"
#include "tokenizer/tokenizer.h"

using namespace pretrain;

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

double process_cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return double(u.ru_utime.tv_sec + u.ru_stime.tv_sec) + double(u.ru_utime.tv_usec + u.ru_stime.tv_usec) * 1e-6;
}

std::vector<std::string> read_lines(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw_errno("cannot open", path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(std::move(line));
  return lines;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"tokenizer throughput benchmark", "bench_tokenizers"};
  std::string tokenizer_path, text, name = "ours";
  int threads = 1, runs = 3;
  bool spm_direct = false;
  app.add_option("--tokenizer", tokenizer_path)->required();
  app.add_option("--text", text, "one text per line")->required();
  app.add_option("--case", name, "the case name printed in the RESULT line");
  app.add_option("--threads", threads)->check(CLI::PositiveNumber);
  app.add_option("--runs", runs)->check(CLI::PositiveNumber);
  app.add_flag("--spm-direct", spm_direct, "call sentencepiece::SentencePieceProcessor directly");
  return run_tool(app, argc, argv, [&] {
    tbb::global_control limit(tbb::global_control::max_allowed_parallelism, size_t(threads));
    const std::vector<std::string> lines = read_lines(text);
    double best = 1e300, best_cpu = 0;
    uint64_t tokens = 0;
    for (int run = 0; run < runs; ++run) {
      tokens = 0;
      const double cpu0 = process_cpu_seconds();
      const double before = best;
      if (spm_direct) {
        sentencepiece::SentencePieceProcessor sp;
        if (auto s = sp.Load(tokenizer_path); !s.ok()) throw Error(Where{tokenizer_path}, s.ToString());
        std::vector<uint64_t> counts(lines.size());
        auto t0 = std::chrono::steady_clock::now();
        tbb::parallel_for(tbb::blocked_range<size_t>(0, lines.size(), 16), [&](const tbb::blocked_range<size_t>& r) {
          std::vector<int> ids;
          for (size_t i = r.begin(); i != r.end(); ++i) {
            ids.clear();
            sp.Encode(lines[i], &ids).IgnoreError();
            counts[i] = ids.size();
          }
        });
        best = std::min(best, seconds_since(t0));
        for (auto c : counts) tokens += c;
        if (best < before) best_cpu = process_cpu_seconds() - cpu0;
      } else {
        auto tok = load_tokenizer(tokenizer_path);
        auto t0 = std::chrono::steady_clock::now();
        auto ids = tok->encode_batch(std::span<const std::string>(lines));
        best = std::min(best, seconds_since(t0));
        if (best < before) best_cpu = process_cpu_seconds() - cpu0;
        for (const auto& v : ids) tokens += v.size();
      }
    }
    std::printf("RESULT %s %.1f %.4f %llu %.4f\n", name.c_str(), double(tokens) / best, best, (unsigned long long)tokens,
                best_cpu);
    return 0;
  });
}
