// Fuzz target: arbitrary bytes through the bz2 scan, block decoding and stream checks of
// Bz2Reader (one thread, small reads so that spans cross chunks). pretrain::Error is the expected
// way to reject input; a crash, hang or any other exception is a bug.
#include <unistd.h>

#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "common/error.h"
#include "common/log.h"
#include "formats/bz2_parallel.h"
#include "formats/bz2_scan.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // Quiet warnings; a reader that stops early closes the pipe under the writer: no SIGPIPE.
  static bool quiet = (pretrain::set_log_level(pretrain::LogLevel::error), std::signal(SIGPIPE, SIG_IGN), true);
  (void)quiet;
  std::span<const uint8_t> bytes(data, size);
  for (pretrain::bz2::Magic m = pretrain::bz2::find_magic(bytes, 0); m.kind != pretrain::bz2::MagicKind::none;
       m = pretrain::bz2::find_magic(bytes, m.bit + 1)) {
    if (m.bit + 48 > size * 8) std::abort();
  }

  int fds[2];
  if (::pipe(fds) != 0) return 0;
  std::thread writer([&] {  // a pipe holds 64 KiB; feed it from the side
    for (size_t at = 0; at < size;) {
      ssize_t n = ::write(fds[1], data + at, size - at);
      if (n <= 0) break;
      at += static_cast<size_t>(n);
    }
    ::close(fds[1]);
  });
  uint64_t delivered = 0;
  try {
    pretrain::Bz2Reader reader(fds[0], "fuzz-input", {.threads = 1, .read_size = 4096});
    reader.for_each_piece([&](std::string_view piece) { delivered += piece.size(); });
  } catch (const pretrain::Error&) {
  }
  ::close(fds[0]);
  writer.join();
  return 0;
}
