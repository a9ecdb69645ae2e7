// A streaming reader of .bz2 (and plain) input that decodes bz2 blocks in parallel and hands the
// decoded bytes over in order, with bounded memory whatever the input size.
//
//   Bz2Reader reader("enwiki.xml.bz2");           // or "-" for stdin, or an .xml file
//   reader.for_each_piece([&](std::string_view bytes) { XML_Parse(parser, bytes…); });
//
// Input is read in pieces (a pipe works the same as a file). A single-stream file is cut at its
// blocks (found by the bit-aligned block magic), a multistream file additionally at its streams;
// every block is decoded on its own by our decoder (bz2_block.cpp; libbz2 is its reference, see
// bz2_scan.h). The output equals `bzip2 -dc`.
// A candidate boundary that is only the magic pattern occurring by chance inside compressed data
// makes the span before it fail to decode; that span is then merged with the next and retried.
// Streams are checked against their combined CRC. Input that does not start with "BZh1"…"BZh9"
// is passed through unchanged.
//
// Threads: a oneTBB parallel_pipeline (serial in-order scan, parallel decode, serial in-order
// checks and delivery); --threads caps it through the global_control of common/cli.h.
#pragma once
#include <tbb/parallel_pipeline.h>

#include <atomic>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace pretrain {

struct Bz2ReaderOptions {
  int threads = 0;               // blocks decoded at once; 0: max_threads()
  size_t max_in_flight = 0;      // pieces alive at once (bounds memory); 0: 2 × threads + 2
  size_t read_size = 8u << 20;   // input bytes read at a time
  // Range mode (mpirun wikiprep gives each rank a byte range of the dump): start at the first bz2
  // block that begins at or after this byte of a regular file and decodes (a candidate magic that
  // is chance, or a damaged block, is skipped: the rank before this one decodes up to the first
  // block that does decode, and reports any damage itself), or at exactly this byte of plain
  // input. The first stream's CRC cannot be checked from the middle; later streams' are. 0: the
  // whole input, as usual.
  uint64_t start_byte = 0;

  // For tests only: bit offsets treated as block-magic / end-of-stream-magic candidates in
  // addition to those the scan finds, to exercise the handling of chance occurrences.
  std::vector<uint64_t> fake_block_magics, fake_stream_ends;
};

namespace bz2_detail {
struct Span;
class Scanner;
class Stitcher;
}  // namespace bz2_detail

// One in-order piece of decoded output: about one bz2 block, or read_size bytes of plain input.
class Bz2Piece {
 public:
  std::string_view bytes() const;
  // Throws the error that ends the input here (after bytes() were delivered), if any.
  void check() const {
    if (error_) std::rethrow_exception(error_);
  }
  // Where this piece's input starts, in bits: a block's magic, or plain input's first byte × 8.
  // Ranges of one input are cut at the first non-empty piece starting at or after a byte.
  uint64_t compressed_begin_bit() const { return begin_bit_; }

 private:
  friend class bz2_detail::Stitcher;
  std::string decoded_;
  std::shared_ptr<const bz2_detail::Span> plain_;  // passthrough bytes, not copied
  std::exception_ptr error_;
  uint64_t begin_bit_ = 0;
};

class Bz2Reader {
 public:
  // `path` "-" reads stdin.
  explicit Bz2Reader(const std::string& path, Bz2ReaderOptions options = {});
  // Reads `fd` (not closed); `name` appears in errors.
  Bz2Reader(int fd, std::string name, Bz2ReaderOptions options = {});
  ~Bz2Reader();
  Bz2Reader(const Bz2Reader&) = delete;
  Bz2Reader& operator=(const Bz2Reader&) = delete;

  // Calls `sink` with every decoded piece in order, one call at a time. Throws pretrain::Error
  // naming the compressed byte offset of the damage after every complete block before it was
  // delivered. Call once.
  void for_each_piece(const std::function<void(std::string_view bytes)>& sink);

  // The same stages as a filter for a caller's own parallel_pipeline (max_in_flight() tokens).
  // In the first serial_in_order stage after it, use bytes() and then piece.check(); the scan has
  // already stopped at an error and later pieces are empty, so that stage may instead keep the
  // exception (catch it) and rethrow it after parallel_pipeline returns, which lets the pipeline
  // drain rather than be cancelled. Use either this or for_each_piece, once.
  tbb::filter<void, std::shared_ptr<Bz2Piece>> source_filter();
  size_t max_in_flight() const { return max_in_flight_; }

  // The same stages run one span at a time on the caller's thread: the next piece in order (its
  // bytes, then check() as above; pieces may be empty), nullptr after the last. This is the serial
  // bz2 source of compressed_input.h, so both give the same bytes and errors. Use instead of the
  // two above.
  std::shared_ptr<Bz2Piece> next_piece();

  // Ends the input early: the scan stops, and the pieces already in flight are the last. For a
  // consumer that has all it wants (a wikiprep rank past the end of its range).
  void stop();

  // Progress: compressed input bytes behind the pieces produced so far; the input size (0 when
  // unknown, e.g. a pipe).
  uint64_t compressed_consumed() const { return consumed_.load(std::memory_order_relaxed); }
  uint64_t compressed_size() const { return input_size_; }
  const std::string& name() const { return name_; }

  // What was read (final after the last piece): whether the input was bz2, streams, blocks.
  bool is_bz2() const;
  uint64_t streams() const;
  uint64_t blocks() const;

 private:
  std::string name_;
  int fd_ = -1;
  bool owns_fd_ = false;
  uint64_t input_size_ = 0;
  size_t max_in_flight_ = 0;
  int threads_ = 1;
  std::atomic<uint64_t> consumed_{0};
  std::unique_ptr<bz2_detail::Scanner> scanner_;
  std::unique_ptr<bz2_detail::Stitcher> stitcher_;
};

}  // namespace pretrain
