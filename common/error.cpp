#include "common/error.h"

#include <cerrno>
#include <cstring>

namespace pretrain {

std::string Where::str() const {
  std::string s = file.empty() ? std::string("<input>") : file;
  if (line >= 0) s += cat(":", line);
  if (offset >= 0) s += cat(": byte ", offset);
  if (record >= 0) s += cat(": record ", record);
  return s;
}

Error::Error(Where where, const std::string& message)
    : std::runtime_error(where.str() + ": " + message), where_(std::move(where)) {}

void throw_errno(const std::string& what, const std::string& path) {
  int e = errno;
  throw Error(Where{path}, cat(what, ": ", std::strerror(e)));
}

}  // namespace pretrain
