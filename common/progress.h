// Progress of long work. On a TTY: one line redrawn in place ("shards  1.20 GB / 4.00 GB  30%
// 210 MB/s  ETA 13s"); otherwise a plain log line every `interval` seconds, so logs of batch jobs
// stay readable. Thread-safe: workers call add() concurrently.
#pragma once
#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>

namespace pretrain {

class Progress {
 public:
  enum class Unit { bytes, items };
  // total = 0 means unknown (no percentage or ETA).
  Progress(std::string label, uint64_t total, Unit unit = Unit::items, double interval_seconds = 5.0);
  ~Progress();
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  void add(uint64_t n);           // done += n; redraws when due
  void set(uint64_t done);        // done = n
  void set_note(std::string note);  // extra text after the figures ("12,345 pages")
  void finish();                  // final line, once
  uint64_t done() const { return done_; }
  std::string line() const;       // the current status line, without redraw

  // Silences every Progress in the process (tests, --quiet).
  static void set_enabled(bool enabled);

 private:
  void maybe_report(bool force);

  std::string label_;
  std::atomic<uint64_t> done_{0};
  std::atomic<uint64_t> total_;
  Unit unit_;
  double interval_;
  bool tty_;
  bool finished_ = false;
  std::string note_;
  std::chrono::steady_clock::time_point start_;
  std::atomic<int64_t> last_report_ns_{0};
  mutable std::mutex mutex_;
};

}  // namespace pretrain
