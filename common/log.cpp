#include "common/log.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <mutex>

namespace pretrain {
namespace {

LogLevel level_from_env() {
  const char* v = std::getenv("PRETRAIN_LOG_LEVEL");
  if (!v) return LogLevel::info;
  std::string s(v);
  if (s == "debug") return LogLevel::debug;
  if (s == "warn") return LogLevel::warn;
  if (s == "error") return LogLevel::error;
  return LogLevel::info;
}

std::atomic<LogLevel>& level_ref() {
  static std::atomic<LogLevel> level{level_from_env()};
  return level;
}

std::mutex& stderr_mutex() {
  static std::mutex m;
  return m;
}

const char* level_name(LogLevel l) {
  switch (l) {
    case LogLevel::debug: return "debug";
    case LogLevel::info: return "info";
    case LogLevel::warn: return "warn";
    case LogLevel::error: return "error";
  }
  return "?";
}

}  // namespace

void set_log_level(LogLevel level) { level_ref() = level; }
LogLevel log_level() { return level_ref(); }

void log_message(LogLevel level, const std::string& message) {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  localtime_r(&t, &tm);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y-%m-%d %H:%M:%S", &tm);
  std::lock_guard lock(stderr_mutex());
  std::fprintf(stderr, "[%s] %s: %s\n", stamp, level_name(level), message.c_str());
  std::fflush(stderr);
}

static std::string scaled(double v, const char* const* units, int n, double step, const char* sep) {
  int i = 0;
  while (v >= step && i + 1 < n) {
    v /= step;
    ++i;
  }
  char buf[48];
  std::snprintf(buf, sizeof buf, i == 0 ? "%.0f%s%s" : "%.2f%s%s", v, *units[i] ? sep : "", units[i]);
  return buf;
}

std::string human_bytes(double bytes) {
  static const char* const units[] = {"B", "kB", "MB", "GB", "TB"};
  return scaled(bytes, units, 5, 1000.0, " ");
}

std::string human_count(double n) {
  static const char* const units[] = {"", "k", "M", "G"};
  return scaled(n, units, 4, 1000.0, "");
}

std::string human_duration(double s) {
  if (!(s >= 0) || s > 1e8) return "?";
  long total = static_cast<long>(s + 0.5);
  char buf[32];
  if (total >= 3600)
    std::snprintf(buf, sizeof buf, "%ldh%02ldm%02lds", total / 3600, total / 60 % 60, total % 60);
  else if (total >= 60)
    std::snprintf(buf, sizeof buf, "%ldm%02lds", total / 60, total % 60);
  else
    std::snprintf(buf, sizeof buf, "%.1fs", s);
  return buf;
}

}  // namespace pretrain
