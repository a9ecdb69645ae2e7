#include "formats/bz2_parallel.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <tbb/task_arena.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>
#include <span>
#include <utility>

#include "common/cli.h"
#include "common/error.h"
#include "common/file.h"
#include "common/log.h"
#include "formats/bz2_scan.h"

namespace pretrain {
namespace bz2_detail {

// No bz2 block is longer than this (900 k symbols of at most 20 bits is 2.25 MB); a span without
// a magic for this long is not bz2 any more.
constexpr uint64_t kMaxSpanBytes = 4u << 20;

// Input bytes [base, base + buffer.size), shared by the spans that lie in them.
struct Chunk {
  uint64_t base = 0;
  ReadBuffer buffer;
  std::span<const uint8_t> bytes() const { return {reinterpret_cast<const uint8_t*>(buffer.bytes.get()), buffer.size}; }
  uint64_t end() const { return base + buffer.size; }
};

// The input between two consecutive candidate boundaries (or a piece of plain input), plus the
// decode result the parallel stage adds.
struct Span {
  // skip: range mode's bytes before the first candidate (the tail of a block the rank before
  // this one decodes).
  enum class Kind { plain, header, block, stream_end, skip };
  Kind kind = Kind::plain;
  std::shared_ptr<const Chunk> chunk;
  uint64_t begin_bit = 0, end_bit = 0;  // absolute bit offsets in the input
  int level = 9;                        // block size of the stream the span lies in
  bool at_eof = false;                  // ends at the end of the input
  bool cut = false;                     // ended by kMaxSpanBytes; nothing follows
  std::exception_ptr read_error;        // reading failed here; thrown in order
  bz2::BlockResult result;              // blocks: set by the decode stage

  bz2::BitRange bits() const {
    uint64_t base_bit = chunk->base * 8;
    return {chunk->bytes(), begin_bit - base_bit, end_bit - base_bit};
  }
  uint64_t size() const { return end_bit - begin_bit; }
  // `count` bits at `offset` bits into the span (zeros past its end).
  uint64_t read(uint64_t offset, unsigned count) const {
    bz2::BitRange r = bits();
    if (offset >= r.size()) return 0;
    uint64_t v = bz2::read_bits(r.bytes, r.begin_bit + offset, count);
    uint64_t have = r.size() - offset;
    return have >= count ? v : v >> (count - have) << (count - have);
  }
};

bool is_stream_header(uint64_t four_bytes) {
  uint64_t digit = four_bytes & 0xFF;
  return (four_bytes >> 8) == 0x425A68 && digit >= '1' && digit <= '9';  // "BZh1"…"BZh9"
}

// Serial stage 1: reads the input in pieces and cuts it at every candidate magic.
class Scanner {
 public:
  // `bz2` and `level`: what the file's first four bytes say, for range mode (start_byte > 0),
  // where the scan starts elsewhere.
  Scanner(int fd, const Bz2ReaderOptions& options, bool bz2, int level)
      : fd_(fd), read_size_(std::max<size_t>(options.read_size, 64)), start_byte_(options.start_byte),
        range_bz2_(bz2), range_level_(level) {
    for (uint64_t bit : options.fake_block_magics) fakes_.push_back({bz2::MagicKind::block, bit});
    for (uint64_t bit : options.fake_stream_ends) fakes_.push_back({bz2::MagicKind::stream_end, bit});
    std::sort(fakes_.begin(), fakes_.end(), [](auto& a, auto& b) { return a.bit < b.bit; });
    struct stat st {};
    const off_t at = ::lseek(fd_, 0, SEEK_CUR);
    if (::fstat(fd_, &st) == 0 && S_ISREG(st.st_mode) && at >= 0 && st.st_size >= at)
      unread_hint_ = static_cast<uint64_t>(st.st_size - at);
  }

  // The next span in input order, or nullptr at the end (or after stop()).
  std::shared_ptr<Span> next() {
    if (done_ || stopped_.load(std::memory_order_relaxed)) return nullptr;
    try {
      return advance();
    } catch (...) {
      done_ = true;
      auto span = std::make_shared<Span>();
      span->chunk = chunk_ ? chunk_ : std::make_shared<Chunk>();
      span->begin_bit = span->end_bit = span->chunk->end() * 8;
      span->read_error = std::current_exception();
      return span;
    }
  }

  void stop() { stopped_ = true; }
  bool is_bz2() const { return bz2_; }

 private:
  std::shared_ptr<Span> advance() {
    if (!chunk_) start();
    if (!bz2_) return next_plain();
    for (;;) {
      uint64_t end_bit = chunk_->end() * 8;
      bz2::Magic m = find_candidate(end_bit);
      if (m.kind != bz2::MagicKind::none) {
        uint64_t header_end = (m.bit + 80 + 7) / 8 + 4;  // a following stream header's end
        if (m.kind == bz2::MagicKind::stream_end && header_end > chunk_->end() && !eof_) {
          grow();
          continue;
        }
        auto span = make_span(m.bit);
        span_begin_ = m.bit;
        span_kind_ = m.kind == bz2::MagicKind::block ? Span::Kind::block : Span::Kind::stream_end;
        scan_from_ = m.bit + 1;  // a chance magic may overlap the real one
        if (m.kind == bz2::MagicKind::stream_end && header_end <= chunk_->end()) {
          uint64_t next = byte_at(header_end - 4) << 24 | byte_at(header_end - 3) << 16 |
                          byte_at(header_end - 2) << 8 | byte_at(header_end - 1);
          if (is_stream_header(next)) level_ = static_cast<int>((next & 0xFF) - '0');
        }
        return span;
      }
      if (end_bit >= 48) scan_from_ = std::max(scan_from_, end_bit - 47);
      if (eof_) {
        done_ = true;
        auto span = make_span(end_bit);
        span->at_eof = true;
        return span;
      }
      if (chunk_->end() - span_begin_ / 8 >= kMaxSpanBytes) {
        done_ = true;
        auto span = make_span(end_bit);
        span->cut = true;
        return span;
      }
      grow();
    }
  }

  void start() {
    chunk_ = std::make_shared<Chunk>();
    if (start_byte_ > 0) return start_range();
    read_more(*chunk_);
    const std::span<const uint8_t> b = chunk_->bytes();
    bz2_ = b.size() >= 4 && is_stream_header(uint64_t{b[0]} << 24 | b[1] << 16 | b[2] << 8 | b[3]);
    if (bz2_) {
      level_ = b[3] - '0';
      span_kind_ = Span::Kind::header;
      scan_from_ = 32;
    }
  }

  // Range mode: the fd is already at start_byte_. A stream header may lie anywhere before, so
  // blocks decode with the first stream's level until a stream header says otherwise (dumps use
  // one level throughout; a larger level than a block's would decode it too).
  void start_range() {
    chunk_->base = start_byte_;
    read_more(*chunk_);
    bz2_ = range_bz2_;
    if (bz2_) {
      level_ = range_level_;
      span_kind_ = Span::Kind::skip;
      span_begin_ = scan_from_ = start_byte_ * 8;
    }
  }

  std::shared_ptr<Span> next_plain() {
    if (plain_sent_) {
      if (eof_) return nullptr;
      auto chunk = std::make_shared<Chunk>();
      chunk->base = chunk_->end();
      chunk_ = chunk;
      read_more(*chunk);
      if (chunk->buffer.size == 0) return nullptr;
    }
    plain_sent_ = true;
    auto span = std::make_shared<Span>();
    span->chunk = chunk_;
    span->begin_bit = chunk_->base * 8;
    span->end_bit = chunk_->end() * 8;
    return span;
  }

  std::shared_ptr<Span> make_span(uint64_t end_bit) {
    auto span = std::make_shared<Span>();
    span->kind = span_kind_;
    span->chunk = chunk_;
    span->begin_bit = span_begin_;
    span->end_bit = end_bit;
    span->level = level_;
    return span;
  }

  // The first real or fake candidate in [scan_from_, end_bit - 48].
  bz2::Magic find_candidate(uint64_t end_bit) {
    uint64_t base_bit = chunk_->base * 8;
    bz2::Magic m = bz2::find_magic(chunk_->bytes(), scan_from_ - base_bit);
    if (m.kind != bz2::MagicKind::none) m.bit += base_bit;
    for (const bz2::Magic& fake : fakes_)
      if (fake.bit >= scan_from_ && fake.bit + 48 <= end_bit &&
          (m.kind == bz2::MagicKind::none || fake.bit < m.bit)) {
        m = fake;
        break;
      }
    return m;
  }

  uint64_t byte_at(uint64_t offset) const { return chunk_->bytes()[offset - chunk_->base]; }

  // A new chunk: the current span's bytes onward, then up to read_size_ more from the input.
  void grow() {
    auto chunk = std::make_shared<Chunk>();
    uint64_t keep = span_begin_ / 8;
    chunk->base = keep;
    const size_t kept = chunk_->end() - keep;
    chunk->buffer.reserve(kept + next_read_size());
    std::memcpy(chunk->buffer.bytes.get(), chunk_->buffer.bytes.get() + (keep - chunk_->base), kept);
    chunk->buffer.size = kept;
    read_more(*chunk);
    chunk_ = chunk;
  }

  // Bytes the next read_more asks for: read_size_, or fewer where fstat said the file ends sooner,
  // so that a small input maps no 4-8 MB buffer; one more than what is left, so that the read
  // which meets the end is this one.
  size_t next_read_size() const {
    return unread_hint_ ? static_cast<size_t>(std::min<uint64_t>(read_size_, *unread_hint_ + 1)) : read_size_;
  }

  // Appends up to read_size_ bytes (fewer only at the end of the input).
  void read_more(Chunk& chunk) {
    ReadBuffer& buffer = chunk.buffer;
    const size_t want = buffer.size + next_read_size();
    buffer.reserve(want);
    while (buffer.size < want) {
      ssize_t n = ::read(fd_, buffer.bytes.get() + buffer.size, want - buffer.size);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) throw Error(cat("read error after byte ", chunk.end(), ": ", std::strerror(errno)));
      if (n == 0) {
        eof_ = true;
        break;
      }
      buffer.size += static_cast<size_t>(n);
      if (unread_hint_) {  // a file that grew since fstat: no hint from here on
        if (static_cast<uint64_t>(n) > *unread_hint_) unread_hint_.reset();
        else *unread_hint_ -= static_cast<uint64_t>(n);
      }
    }
  }

  int fd_;
  size_t read_size_;
  uint64_t start_byte_;
  bool range_bz2_;
  int range_level_;
  std::vector<bz2::Magic> fakes_;
  std::optional<uint64_t> unread_hint_;  // bytes left in a regular file, from fstat
  std::shared_ptr<Chunk> chunk_;
  bool eof_ = false, done_ = false, bz2_ = false, plain_sent_ = false;
  std::atomic<bool> stopped_{false};
  uint64_t span_begin_ = 0, scan_from_ = 0;
  Span::Kind span_kind_ = Span::Kind::header;
  int level_ = 9;
};

// Serial last stage: checks the structure in order, merges spans cut at chance magics, checks
// stream CRCs, and turns spans into pieces. Errors travel inside pieces so that every piece
// before the damage is delivered first.
class Stitcher {
 public:
  // `range`: the scan starts in the middle of the input (Bz2ReaderOptions::start_byte).
  Stitcher(std::string name, Scanner& scanner, std::atomic<uint64_t>& consumed, bool range)
      : name_(std::move(name)), scanner_(scanner), consumed_(consumed), synced_(!range), crc_valid_(!range) {}

  std::shared_ptr<Bz2Piece> accept(std::shared_ptr<Span> span) {
    auto piece = std::make_shared<Bz2Piece>();
    if (!finished_) {
      if (span->read_error) {
        piece->error_ = wrap_read_error(*span);
        finish();
      } else if (!pending_.empty()) {
        on_pending(span, *piece);
      } else {
        dispatch(span, *piece);
      }
    }
    return piece;
  }

  uint64_t streams() const { return streams_; }
  uint64_t blocks() const { return blocks_; }

 private:
  void dispatch(const std::shared_ptr<Span>& span, Bz2Piece& piece) {
    switch (span->kind) {
      case Span::Kind::plain:
        piece.plain_ = span;
        piece.begin_bit_ = span->begin_bit;
        set_consumed(span->end_bit / 8);
        break;
      case Span::Kind::header: on_header(*span, piece); break;
      case Span::Kind::block: on_block(span, piece); break;
      case Span::Kind::stream_end: on_stream_end(*span, piece); break;
      case Span::Kind::skip:
        set_consumed(span->end_bit / 8);
        if (span->at_eof || span->cut) finish();  // no block starts in the range
        break;
    }
  }

  std::exception_ptr wrap_read_error(const Span& span) {
    try {
      std::rethrow_exception(span.read_error);
    } catch (const std::exception& e) {
      return std::make_exception_ptr(Error(Where::at_offset(name_, static_cast<int64_t>(span.end_bit / 8)), e.what()));
    }
  }

  void fail(Bz2Piece& piece, uint64_t bit, const std::string& message) {
    piece.error_ = std::make_exception_ptr(
        Error(Where::at_offset(name_, static_cast<int64_t>(bit / 8)), cat(message, " (bit ", bit % 8, " of that byte)")));
    finish();
  }

  void finish() {
    finished_ = true;
    pending_.clear();
    scanner_.stop();
  }

  void set_consumed(uint64_t byte) { consumed_.store(byte, std::memory_order_relaxed); }

  void deliver_block(const Span& first, std::string decoded, uint64_t end_bit, Bz2Piece& piece) {
    uint32_t crc = static_cast<uint32_t>(first.read(48, 32));
    stream_crc_ = (stream_crc_ << 1 | stream_crc_ >> 31) ^ crc;
    ++blocks_;
    piece.decoded_ = std::move(decoded);
    piece.begin_bit_ = first.begin_bit;
    synced_ = true;
    set_consumed(end_bit / 8);
  }

  void on_header(const Span& span, Bz2Piece& piece) {
    if (span.end_bit == 32 && !span.at_eof) {
      set_consumed(4);
    } else if (span.end_bit == 32) {
      fail(piece, 32, "the file ends right after the bz2 stream header (truncated)");
    } else {
      fail(piece, 32, "expected a bz2 block magic after the stream header");
    }
  }

  void on_block(const std::shared_ptr<Span>& span, Bz2Piece& piece) {
    if (!span->result.ok && span->at_eof) try_without_partial_magic(*span);
    if (span->result.ok) {
      deliver_block(*span, std::move(span->result.decoded), span->end_bit, piece);
      if (span->at_eof) fail(piece, span->end_bit, "the file ends without the end-of-stream marker (truncated)");
      else if (span->cut) fail(piece, span->end_bit, "no bz2 block boundary follows");
    } else if (span->at_eof || span->cut) {
      if (synced_) fail(piece, span->begin_bit, block_failure(*span, span->result.error));
      else finish();  // nothing decodes in the range: the rank before reads on to the end
    } else {
      pending_ = {span};
    }
  }

  // A file cut inside the end-of-stream magic leaves a partial magic after the last block; the
  // block itself is complete, so decode it without those bits.
  void try_without_partial_magic(Span& span) {
    for (unsigned k = 1; k < 48 && k + 80 < span.size(); ++k) {
      uint64_t tail = span.read(span.size() - k, k);
      if (tail != bz2::kStreamEndMagic >> (48 - k) && tail != bz2::kBlockMagic >> (48 - k)) continue;
      bz2::BitRange r = span.bits();
      r.end_bit -= k;
      bz2::BlockResult result = bz2::decode_block({&r, 1}, span.level);
      if (result.ok) {
        span.result = std::move(result);
        span.end_bit -= k;
        return;
      }
    }
  }

  std::string block_failure(const Span& span, const std::string& why) const {
    if (span.at_eof) return cat("the file ends inside the bz2 block that starts here (truncated or corrupt: ", why, ")");
    return cat("corrupt bz2 block starting here: ", why);
  }

  // A failed block waits here: the next boundary may be a chance occurrence of a magic inside it.
  void on_pending(const std::shared_ptr<Span>& span, Bz2Piece& piece) {
    if (!synced_) return on_pending_unsynced(span, piece);
    const Span& first = *pending_.front();
    bool next_is_real = (span->kind == Span::Kind::block && span->result.ok) ||
                        (span->kind == Span::Kind::stream_end && looks_like_stream_end(*span));
    if (next_is_real) return fail(piece, first.begin_bit, block_failure(first, first.result.error));
    pending_.push_back(span);
    if ((span->end_bit - first.begin_bit) / 8 > kMaxSpanBytes)
      return fail(piece, first.begin_bit, block_failure(first, first.result.error));
    std::vector<bz2::BitRange> parts;
    for (const auto& s : pending_) parts.push_back(s->bits());
    bz2::BlockResult merged = bz2::decode_block(parts, first.level);
    if (merged.ok) {
      auto keep = pending_.front();
      pending_.clear();
      deliver_block(*keep, std::move(merged.decoded), span->end_bit, piece);
      if (span->at_eof) fail(piece, span->end_bit, "the file ends without the end-of-stream marker (truncated)");
    } else if (span->at_eof || span->cut) {
      Span whole = first;
      whole.at_eof = span->at_eof;
      fail(piece, first.begin_bit, block_failure(whole, first.result.error));
    }
  }

  // Range mode before the first block: the pending spans began at a chance magic, at a damaged
  // block (the rank before reports it), or at a real block that a chance magic cut. A span that
  // decodes alone is the first block; otherwise the first run of pending spans that decodes
  // joined is (a suffix: its start must be a real boundary).
  void on_pending_unsynced(const std::shared_ptr<Span>& span, Bz2Piece& piece) {
    bool next_is_real = (span->kind == Span::Kind::block && span->result.ok) ||
                        (span->kind == Span::Kind::stream_end && looks_like_stream_end(*span));
    if (next_is_real) {
      pending_.clear();
      return dispatch(span, piece);
    }
    pending_.push_back(span);
    while (pending_.size() > 1 && (span->end_bit - pending_.front()->begin_bit) / 8 > kMaxSpanBytes)
      pending_.erase(pending_.begin());
    for (size_t k = 0; k + 1 < pending_.size(); ++k) {
      if (pending_[k]->kind != Span::Kind::block) continue;
      std::vector<bz2::BitRange> parts;
      for (size_t i = k; i < pending_.size(); ++i) parts.push_back(pending_[i]->bits());
      bz2::BlockResult merged = bz2::decode_block(parts, pending_[k]->level);
      if (!merged.ok) continue;
      auto keep = pending_[k];
      pending_.clear();
      deliver_block(*keep, std::move(merged.decoded), span->end_bit, piece);
      if (span->at_eof) fail(piece, span->end_bit, "the file ends without the end-of-stream marker (truncated)");
      return;
    }
    if (span->at_eof || span->cut) finish();
  }

  // Bits after an end-of-stream magic at the span's start: stored CRC, padding to a byte, then
  // the end of the input or the next stream's "BZh1"…"BZh9" right before the next candidate.
  bool looks_like_stream_end(const Span& span) const {
    if (span.size() < 80) return false;
    uint64_t q = (span.begin_bit + 80 + 7) / 8 * 8;
    if (span.at_eof && span.end_bit == q) return true;
    return !span.at_eof && span.end_bit == q + 32 && is_stream_header(span.read(q - span.begin_bit, 32));
  }

  void on_stream_end(const Span& span, Bz2Piece& piece) {
    if (!synced_ && !looks_like_stream_end(span)) {  // a chance magic before the range's first block
      if (span.at_eof || span.cut) finish();
      return;
    }
    if (span.size() < 80)
      return fail(piece, span.begin_bit, span.at_eof ? "the file ends inside the end-of-stream marker (truncated)"
                                                     : "corrupt end-of-stream marker");
    uint32_t stored = static_cast<uint32_t>(span.read(48, 32));
    if (crc_valid_ && stored != stream_crc_)
      return fail(piece, span.begin_bit, cat("stream CRC mismatch: the end-of-stream marker stores ", stored,
                                             ", the blocks give ", stream_crc_));
    ++streams_;
    stream_crc_ = 0;
    crc_valid_ = true;  // range mode: the next stream is read from its first block
    uint64_t q = (span.begin_bit + 80 + 7) / 8 * 8;  // the byte after the padding
    set_consumed(std::min(q, span.end_bit) / 8);
    if (span.at_eof && span.end_bit <= q) return finish();
    uint64_t tail = span.end_bit > q ? span.end_bit - q : 0;
    uint64_t next = span.read(q - span.begin_bit, 32);
    if (tail >= 32 && is_stream_header(next)) {
      if (tail == 32 && !span.at_eof) return set_consumed(q / 8 + 4);
      if (tail == 32) return fail(piece, q + 32, "the file ends right after a bz2 stream header (truncated)");
      return fail(piece, q + 32, "expected a bz2 block magic after the stream header");
    }
    // "B", "BZ" or "BZh" at the very end: the next stream's header was cut off (bzip2 says so too).
    if (span.at_eof && tail < 32 && next >> (32 - tail) == 0x425A68u >> (24 - tail))
      return fail(piece, span.end_bit, "the file ends inside a bz2 stream header (truncated)");
    log_warn(name_, ": trailing garbage after the last bz2 stream at byte ", q / 8, " ignored (as bzip2 -d does)");
    finish();
  }

  std::string name_;
  Scanner& scanner_;
  std::atomic<uint64_t>& consumed_;
  std::vector<std::shared_ptr<Span>> pending_;  // a failed block and the spans merged into it
  uint32_t stream_crc_ = 0;
  uint64_t streams_ = 0, blocks_ = 0;
  bool finished_ = false;
  bool synced_;     // a block was delivered (range mode starts false)
  bool crc_valid_;  // stream_crc_ covers the stream from its first block
};

// The parallel stage: a block span decoded on its own (the stitcher merges and retries spans
// that a chance magic cut).
void decode(Span& span) {
  if (span.kind != Span::Kind::block || span.read_error) return;
  bz2::BitRange r = span.bits();
  span.result = bz2::decode_block({&r, 1}, span.level);
}

}  // namespace bz2_detail

std::string_view Bz2Piece::bytes() const {
  if (!plain_) return decoded_;
  const std::span<const uint8_t> b = plain_->chunk->bytes();
  return {reinterpret_cast<const char*>(b.data()), b.size()};
}

Bz2Reader::Bz2Reader(const std::string& path, Bz2ReaderOptions options)
    : Bz2Reader(-1, path, std::move(options)) {}

Bz2Reader::Bz2Reader(int fd, std::string name, Bz2ReaderOptions options) : name_(std::move(name)) {
  if (fd < 0) {
    if (name_ == "-") {
      fd = STDIN_FILENO;
    } else {
      fd = ::open(name_.c_str(), O_RDONLY | O_CLOEXEC);
      if (fd < 0) throw_errno("cannot open", name_);
      owns_fd_ = true;
    }
  }
  fd_ = fd;
  struct stat st {};
  const bool regular = ::fstat(fd_, &st) == 0 && S_ISREG(st.st_mode);
  if (regular) {
    input_size_ = static_cast<uint64_t>(st.st_size);
    ::posix_fadvise(fd_, 0, 0, POSIX_FADV_SEQUENTIAL);
  }
  bool range_bz2 = false;
  int range_level = 9;
  if (options.start_byte > 0) {
    if (!regular) {
      if (owns_fd_) ::close(fd_);
      throw UsageError(Where{name_}, "reading from a byte offset needs a regular file, not a pipe");
    }
    unsigned char head[4] = {};
    if (::pread(fd_, head, 4, 0) == 4) {
      uint64_t four = uint64_t{head[0]} << 24 | head[1] << 16 | head[2] << 8 | head[3];
      range_bz2 = bz2_detail::is_stream_header(four);
      if (range_bz2) range_level = head[3] - '0';
    }
    if (::lseek(fd_, static_cast<off_t>(options.start_byte), SEEK_SET) < 0) {
      const int seek_errno = errno;
      if (owns_fd_) ::close(fd_);
      errno = seek_errno;
      throw_errno("cannot seek in", name_);
    }
  }
  if (options.threads <= 0) options.threads = max_threads();
  max_in_flight_ = options.max_in_flight > 0 ? options.max_in_flight : 2 * static_cast<size_t>(options.threads) + 2;
  threads_ = options.threads;
  scanner_ = std::make_unique<bz2_detail::Scanner>(fd_, options, range_bz2, range_level);
  stitcher_ = std::make_unique<bz2_detail::Stitcher>(name_, *scanner_, consumed_, options.start_byte > 0);
}

Bz2Reader::~Bz2Reader() {
  if (owns_fd_) ::close(fd_);
}

tbb::filter<void, std::shared_ptr<Bz2Piece>> Bz2Reader::source_filter() {
  using bz2_detail::Span;
  auto scan = tbb::make_filter<void, std::shared_ptr<Span>>(tbb::filter_mode::serial_in_order, [this](tbb::flow_control& fc) {
    auto span = scanner_->next();
    if (!span) fc.stop();
    return span;
  });
  auto decode = tbb::make_filter<std::shared_ptr<Span>, std::shared_ptr<Span>>(tbb::filter_mode::parallel, [](std::shared_ptr<Span> span) {
    bz2_detail::decode(*span);
    return span;
  });
  auto stitch = tbb::make_filter<std::shared_ptr<Span>, std::shared_ptr<Bz2Piece>>(
      tbb::filter_mode::serial_in_order, [this](std::shared_ptr<Span> span) { return stitcher_->accept(std::move(span)); });
  return scan & decode & stitch;
}

std::shared_ptr<Bz2Piece> Bz2Reader::next_piece() {
  auto span = scanner_->next();
  if (!span) return nullptr;
  bz2_detail::decode(*span);
  return stitcher_->accept(std::move(span));
}

void Bz2Reader::for_each_piece(const std::function<void(std::string_view bytes)>& sink) {
  // Errors (ours or the sink's) stop the scan and let the pipeline drain instead of cancelling
  // it, so that no token is left behind; the first one is thrown afterwards.
  std::exception_ptr error;
  auto deliver = tbb::make_filter<std::shared_ptr<Bz2Piece>, void>(tbb::filter_mode::serial_in_order, [&](std::shared_ptr<Bz2Piece> piece) {
    if (error) return;
    try {
      if (!piece->bytes().empty()) sink(piece->bytes());
      piece->check();
    } catch (...) {
      error = std::current_exception();
      scanner_->stop();
    }
  });
  tbb::task_arena arena(std::min(threads_, max_threads()));
  arena.execute([&] { tbb::parallel_pipeline(max_in_flight_, source_filter() & deliver); });
  if (error) std::rethrow_exception(error);
}

void Bz2Reader::stop() { scanner_->stop(); }
bool Bz2Reader::is_bz2() const { return scanner_->is_bz2(); }
uint64_t Bz2Reader::streams() const { return stitcher_->streams(); }
uint64_t Bz2Reader::blocks() const { return stitcher_->blocks(); }

}  // namespace pretrain
