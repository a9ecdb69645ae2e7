#include "common/progress.h"

#include <unistd.h>

#include <cstdio>

#include "common/log.h"

namespace pretrain {
namespace {
std::atomic<bool> g_enabled{true};
}

void Progress::set_enabled(bool enabled) { g_enabled = enabled; }

Progress::Progress(std::string label, uint64_t total, Unit unit, double interval_seconds)
    : label_(std::move(label)),
      total_(total),
      unit_(unit),
      interval_(interval_seconds),
      tty_(isatty(STDERR_FILENO) != 0),
      start_(std::chrono::steady_clock::now()) {
  if (tty_) interval_ = 0.2;
}

Progress::~Progress() { finish(); }

void Progress::add(uint64_t n) {
  done_ += n;
  maybe_report(false);
}

void Progress::set(uint64_t done) {
  done_ = done;
  maybe_report(false);
}

void Progress::set_note(std::string note) {
  std::lock_guard lock(mutex_);
  note_ = std::move(note);
}

std::string Progress::line() const {
  double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  uint64_t done = done_, total = total_;
  double rate = elapsed > 0 ? done / elapsed : 0;
  auto fmt = [&](double v) { return unit_ == Unit::bytes ? human_bytes(v) : human_count(v); };
  std::string s = label_ + "  " + fmt(done);
  if (total) s += cat(" / ", fmt(total), "  ", static_cast<int>(100.0 * done / total), "%");
  s += cat("  ", fmt(rate), "/s");
  if (total && rate > 0 && done < total) s += "  ETA " + human_duration((total - done) / rate);
  s += "  elapsed " + human_duration(elapsed);
  std::lock_guard lock(mutex_);
  if (!note_.empty()) s += "  " + note_;
  return s;
}

void Progress::maybe_report(bool force) {
  if (!g_enabled) return;
  int64_t now = std::chrono::duration_cast<std::chrono::nanoseconds>(
                    std::chrono::steady_clock::now() - start_).count();
  int64_t last = last_report_ns_;
  if (!force) {
    if (now - last < static_cast<int64_t>(interval_ * 1e9)) return;
    if (!last_report_ns_.compare_exchange_strong(last, now)) return;  // another thread reports
  }
  std::string s = line();
  if (tty_) {
    std::fprintf(stderr, "\r\033[K%s", s.c_str());
    if (force) std::fputc('\n', stderr);
    std::fflush(stderr);
  } else {
    log_info(s);
  }
}

void Progress::finish() {
  {
    std::lock_guard lock(mutex_);
    if (finished_) return;
    finished_ = true;
  }
  maybe_report(true);
}

}  // namespace pretrain
