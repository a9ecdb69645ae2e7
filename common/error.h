// Errors that say where and what: the file, the byte offset / record / line, and what was expected.
// Tools turn them into "error: …" and exit 1 (data or runtime error) or 2 (bad usage).
#pragma once
#include <atomic>
#include <cstdint>
#include <exception>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <string>

namespace pretrain {

// Streams every argument into one string: cat("record ", 7, " of ", path).
template <typename... Args>
std::string cat(const Args&... args) {
  std::ostringstream out;
  (out << ... << args);
  return out.str();
}

// Where in the input something went wrong. Unset fields are -1 / empty.
struct Where {
  std::string file;
  int64_t offset = -1;  // byte offset in `file`
  int64_t record = -1;  // record / sequence / document index
  int64_t line = -1;    // 1-based line number

  static Where at_offset(std::string file, int64_t offset) { return {std::move(file), offset, -1, -1}; }
  static Where at_record(std::string file, int64_t record) { return {std::move(file), -1, record, -1}; }
  static Where at_line(std::string file, int64_t line) { return {std::move(file), -1, -1, line}; }
  std::string str() const;  // "path: byte 17" / "path: record 3" / "path:12"
};

// A data or runtime error (exit 1). what() = "<where>: <message>".
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
  Error(Where where, const std::string& message);
  const Where& where() const { return where_; }

 private:
  Where where_;
};

// The caller asked for something impossible (exit 2).
class UsageError : public Error {
 public:
  using Error::Error;
};

// Throws Error(where, expected/found message) when `ok` is false.
inline void expect(bool ok, const Where& where, const std::string& expected, const std::string& found) {
  if (!ok) throw Error(where, cat("expected ", expected, ", found ", found));
}

// strerror(errno) with the operation and path: "cannot open 'x': No such file or directory".
[[noreturn]] void throw_errno(const std::string& what, const std::string& path);

// The first exception thrown by work on several threads, kept to be rethrown later.
// Why: when a stage of tbb::parallel_pipeline throws, oneTBB cancels the pipeline and never
// destroys the items waiting in its serial stages' buffers: they leak. Stages that run their work
// through keep() let the pipeline drain instead: once failed(), the source stops and the later
// stages pass their items through untouched; call rethrow() after parallel_pipeline returns.
class FirstError {
 public:
  // Runs work(); when it throws, keeps the exception (the first of all callers') and returns false.
  template <typename Work>
  bool keep(Work&& work) noexcept {
    try {
      work();
      return true;
    } catch (...) {
      set(std::current_exception());
      return false;
    }
  }
  bool failed() const { return failed_.load(std::memory_order_acquire); }
  // Throws the kept exception, if any. Call once the threads are done.
  void rethrow() const {
    if (failed()) std::rethrow_exception(first_);
  }

 private:
  void set(std::exception_ptr error) {
    std::lock_guard lock(mutex_);
    if (!first_) first_ = std::move(error);
    failed_.store(true, std::memory_order_release);
  }

  std::atomic<bool> failed_{false};
  std::mutex mutex_;
  std::exception_ptr first_;
};

}  // namespace pretrain
