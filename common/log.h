// Logging to stderr: "[2026-11-21 23:59:01] warn: …". PRETRAIN_LOG_LEVEL=debug|info|warn|error.
#pragma once
#include <string>

#include "common/error.h"

namespace pretrain {

enum class LogLevel { debug = 0, info = 1, warn = 2, error = 3 };

void set_log_level(LogLevel level);
LogLevel log_level();
void log_message(LogLevel level, const std::string& message);

template <typename... Args> void log_info(const Args&... a) { if (log_level() <= LogLevel::info) log_message(LogLevel::info, cat(a...)); }
template <typename... Args> void log_warn(const Args&... a) { if (log_level() <= LogLevel::warn) log_message(LogLevel::warn, cat(a...)); }
template <typename... Args> void log_error(const Args&... a) { log_message(LogLevel::error, cat(a...)); }

// "1.50 GB", "12.3 MB/s" style figures for humans.
std::string human_bytes(double bytes);
std::string human_count(double n);
std::string human_duration(double seconds);

}  // namespace pretrain
