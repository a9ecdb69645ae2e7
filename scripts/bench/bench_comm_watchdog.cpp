// The cost of marking a call in flight for the watchdog (common/comm_watchdog.h): the nanoseconds a
// CommWatchdog::Call adds to each collective, with the process's watchdog off and on (its clock, its
// thread running), from one thread and from two at once (the trainer's and the gradient reducer's).
//   bench_comm_watchdog [--calls N]
// Prints one JSON object: ns per call, the median of 7 rounds, for each case.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/cli.h"
#include "common/comm_watchdog.h"

using namespace pretrain;

namespace {

int64_t steady_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// ns per Call over `calls` of them on each of `threads` threads (the slowest thread's time).
double ns_per_call(CommWatchdog& w, int64_t calls, int threads) {
  std::vector<double> ns(static_cast<size_t>(threads));
  std::vector<std::thread> running;
  for (int t = 0; t < threads; ++t)
    running.emplace_back([&, t] {
      const int64_t t0 = steady_ns();
      for (int64_t i = 0; i < calls; ++i) {
        const CommWatchdog::Call call(w, "all-reduce", "the data group (world ranks 0, 1)");
        std::atomic_signal_fence(std::memory_order_seq_cst);  // keep the loop
      }
      ns[size_t(t)] = double(steady_ns() - t0) / double(calls);
    });
  for (std::thread& t : running) t.join();
  return *std::max_element(ns.begin(), ns.end());
}

double median_of_rounds(CommWatchdog& w, int64_t calls, int threads) {
  std::vector<double> rounds;
  for (int r = 0; r < 7; ++r) rounds.push_back(ns_per_call(w, calls, threads));
  std::sort(rounds.begin(), rounds.end());
  return rounds[rounds.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Time the watchdog's in-flight marker (CommWatchdog::Call)", "bench_comm_watchdog"};
  int64_t calls = 2'000'000;
  app.add_option("--calls", calls, "calls per thread per round")->capture_default_str();
  return run_tool(app, argc, argv, [&] {
    CommWatchdog& w = comm_watchdog();
    w.attach(0, {"here", "there"});
    nlohmann::json out;
    out["off_1_thread_ns"] = median_of_rounds(w, calls, 1);
    w.set_timeout(300);  // on: its thread wakes every second
    out["on_1_thread_ns"] = median_of_rounds(w, calls, 1);
    out["on_2_threads_ns"] = median_of_rounds(w, calls, 2);
    out["calls"] = calls;
    std::printf("%s\n", out.dump().c_str());
    return 0;
  });
}
