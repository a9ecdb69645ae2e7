#include "datagen/wikiprep/page_range.h"

#include <algorithm>
#include <cstring>

#include "common/error.h"
#include "formats/bz2_parallel.h"

namespace pretrain {
namespace {

constexpr std::string_view kPageTag = "<page";
constexpr size_t kTagBytes = kPageTag.size() + 1;  // and the '>' or space after it
constexpr size_t kHeld = kTagBytes - 1;            // a tag may start in the last bytes of a piece

bool ends_tag_name(char c) { return c == '>' || c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

// The first "<page" tag at or after `from` in `s`, whole (its next byte included), or npos.
size_t find_page_tag(std::string_view s, size_t from) {
  for (size_t i = s.find(kPageTag, from); i != std::string_view::npos; i = s.find(kPageTag, i + 1)) {
    if (i + kTagBytes > s.size()) return std::string_view::npos;
    if (ends_tag_name(s[i + kPageTag.size()])) return i;
  }
  return std::string_view::npos;
}

}  // namespace

PageRangeFeeder::PageRangeFeeder(XmlPageReader& xml, std::string head, bool first)
    : xml_(xml), head_(std::move(head)), state_(first ? State::feeding : State::seeking), fed_anything_(first) {}

uint64_t PageRangeFeeder::find_page(uint64_t from) const {
  size_t at = find_page_tag(window_, from > window_at_ ? from - window_at_ : 0);
  return at == std::string_view::npos ? npos : window_at_ + at;
}

void PageRangeFeeder::feed_xml(uint64_t until) {
  if (until <= window_at_) return;
  size_t n = static_cast<size_t>(until - window_at_);
  xml_.feed(std::string_view(window_).substr(0, n));
  window_.erase(0, n);
  window_at_ = until;
}

void PageRangeFeeder::start_feeding() {
  xml_.feed(head_);
  fed_anything_ = true;
  state_ = State::feeding;
}

void PageRangeFeeder::feed(std::string_view bytes, size_t cut) {
  if (state_ == State::done) return;
  const uint64_t at = seen_;
  seen_ += bytes.size();
  if (cut != npos && cut_at_ == UINT64_MAX) cut_at_ = at + std::min<uint64_t>(cut, bytes.size());
  range_bytes_ += cut_at_ == UINT64_MAX ? bytes.size() : cut_at_ > at ? std::min<uint64_t>(cut_at_ - at, bytes.size()) : 0;

  // Before the cut, everything is the share's: straight through, no copy.
  if (state_ == State::feeding && cut_at_ == UINT64_MAX && window_.empty()) {
    xml_.feed(bytes);
    window_at_ = seen_;
    return;
  }
  window_.append(bytes);
  const uint64_t end = seen_;
  // Positions below `decided` have been searched with their whole tag in view.
  const uint64_t decided = end >= kHeld ? end - kHeld : 0;

  if (state_ == State::seeking) {
    uint64_t p = find_page(window_at_);
    if (p != npos && p < cut_at_) {
      window_.erase(0, static_cast<size_t>(p - window_at_));
      window_at_ = p;
      start_feeding();
    } else if (p != npos || decided >= cut_at_) {
      state_ = State::done;  // no page starts in this range: the rank before has them all
      window_.clear();
      return;
    } else {
      uint64_t drop = std::max(window_at_, decided) - window_at_;
      window_.erase(0, static_cast<size_t>(drop));
      window_at_ += drop;
      return;
    }
  }
  if (cut_at_ == UINT64_MAX) return feed_xml(end);
  uint64_t p = find_page(std::max(window_at_, cut_at_));
  if (p != npos) {
    feed_xml(p);
    window_.clear();
    closed_by_cut_ = true;
    state_ = State::done;
  } else {
    feed_xml(std::max(window_at_, decided));
  }
}

void PageRangeFeeder::finish() {
  if (state_ == State::feeding) {
    feed_xml(window_at_ + window_.size());  // the end of the input: the dump's own end follows
  } else if (!fed_anything_) {
    xml_.feed(head_);  // no page here: a dump of no pages, for the site information
    xml_.feed("</mediawiki>\n");
  } else if (closed_by_cut_) {
    xml_.feed("\n</mediawiki>\n");
  }
  state_ = State::done;
  xml_.finish();
}

std::string dump_head(const std::string& path) {
  constexpr size_t kMaxHead = size_t{64} << 20;
  Bz2Reader reader(path, {.threads = 1});
  std::string head;
  for (auto piece = reader.next_piece(); piece; piece = reader.next_piece()) {
    size_t from = head.size() >= kTagBytes ? head.size() - kTagBytes : 0;
    head.append(piece->bytes());
    piece->check();
    size_t at = find_page_tag(head, from);
    if (at != std::string::npos) {
      head.resize(at);
      return head;
    }
    if (head.size() > kMaxHead)
      throw Error(Where{path}, cat("no <page> in the first ", head.size(),
                                   " decoded bytes: under mpirun, wikiprep needs a UTF-8 MediaWiki dump "
                                   "(run it without mpirun to see what one process makes of this input)"));
  }
  return {};  // a dump without pages
}

}  // namespace pretrain
