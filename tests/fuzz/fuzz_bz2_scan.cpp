// Fuzz target: arbitrary bytes through the bz2 scan, block decoding and stream checks of
// Bz2Reader (one thread, small reads so that spans cross chunks). pretrain::Error is the expected
// way to reject input; a crash, hang or any other exception is a bug. Every span from a block
// magic to the next magic also goes through our block decoder and libbz2's
// (decode_block_reference): they must both fail or give the same bytes.
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
  namespace bz2 = pretrain::bz2;
  int level = size >= 4 && data[3] >= '1' && data[3] <= '9' ? data[3] - '0' : 9;
  for (bz2::Magic m = bz2::find_magic(bytes, 0); m.kind != bz2::MagicKind::none;) {
    if (m.bit + 48 > size * 8) std::abort();
    bz2::Magic next = bz2::find_magic(bytes, m.bit + 1);
    if (m.kind == bz2::MagicKind::block) {
      bz2::BitRange r{bytes, m.bit, next.kind == bz2::MagicKind::none ? size * 8 : next.bit};
      bz2::BlockResult ours = bz2::decode_block({&r, 1}, level);
      bz2::BlockResult reference = bz2::decode_block_reference({&r, 1}, level);
      if (ours.ok != reference.ok || ours.decoded != reference.decoded) {
        std::fprintf(stderr, "block at bit %llu: ours %s, libbz2 %s\n", static_cast<unsigned long long>(m.bit),
                     ours.ok ? "ok" : ours.error.c_str(), reference.ok ? "ok" : reference.error.c_str());
        std::abort();
      }
      if (!ours.ok && ours.error.empty()) std::abort();
    }
    m = next;
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
