// One rank's share of a dump under `mpirun wikiprep` (docs/architecture.md: "the ranks of wikiprep … share
// the work over a common filesystem and produce the bytes one process would").
//
// Ranks read consecutive byte ranges of the dump (Bz2ReaderOptions::start_byte: a bz2 range starts
// at the first block at or after its first byte). Rank r's pages are those whose "<page" starts in
// the decoded bytes of its own range: at or after the first decoded byte of the range, and before
// the first decoded byte of rank r + 1's (the cut), so every page belongs to exactly one rank and a
// page that runs past the cut is finished by the rank it began in. The share is fed to an
// XmlPageReader as a dump of its own:
//
//   the dump's head (every byte before its first "<page": <mediawiki …>, <siteinfo>)
//   + the share's pages, from its first "<page" to just before the first "<page" at or past the cut
//   + "</mediawiki>"          (the last rank gets the dump's own end instead)
//
// Rank 0's range starts with the head itself. "<page" can only be markup: inside text a '<' is
// always escaped, and dumps have no comments or CDATA sections.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

#include "datagen/wikiprep/xml_pages.h"

namespace pretrain {

class PageRangeFeeder {
 public:
  static constexpr size_t npos = std::string_view::npos;

  // `head`: the dump's bytes before its first "<page" (dump_head()), for every rank but the first;
  // `first`: this range starts the dump.
  PageRangeFeeder(XmlPageReader& xml, std::string head, bool first);

  // The next decoded bytes, in order. `cut`: where in `bytes` the next rank's range begins, if it
  // does in this piece (then every later piece is past the cut too).
  void feed(std::string_view bytes, size_t cut = npos);
  // Every page of the share has been fed: the rest of the input is not needed.
  bool done() const { return state_ == State::done; }
  // At the end of the input or when done(): feeds what is held back and the end, and finishes the
  // XmlPageReader (which may throw, e.g. for a dump cut inside a page).
  void finish();
  // Decoded bytes of the range itself (its first byte to the cut), for the statistics: the ranks'
  // figures add up to the one-process run's.
  uint64_t range_bytes() const { return range_bytes_; }

 private:
  enum class State { seeking, feeding, done };
  // The first "<page" at or after `from` (absolute) that lies wholly in window_, or npos.
  uint64_t find_page(uint64_t from) const;
  void feed_xml(uint64_t until);  // window_ up to `until` (absolute)
  void start_feeding();

  XmlPageReader& xml_;
  std::string head_;
  State state_;
  bool fed_anything_ = false;
  bool closed_by_cut_ = false;
  // window_: the bytes not yet fed or skipped, starting at absolute offset window_at_ of the
  // range's decoded bytes (a few held-back bytes, plus the current piece).
  std::string window_;
  uint64_t window_at_ = 0;
  uint64_t cut_at_ = UINT64_MAX;  // absolute, once known
  uint64_t seen_ = 0;             // decoded bytes received
  uint64_t range_bytes_ = 0;
};

// The bytes before the dump's first "<page" (its <mediawiki> start tag and <siteinfo>), decoded
// from the start of `path`; "" for a dump without pages. Throws Error when no "<page" starts in its
// first 64 MB (a dump that is not UTF-8 XML, or not a dump: run without mpirun for what a single
// process makes of it).
std::string dump_head(const std::string& path);

}  // namespace pretrain
