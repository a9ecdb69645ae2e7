// Fuzz target for XmlPageReader: the input after its first byte is a dump, fed in two chunks split
// where the first byte says (so chunk boundaries land everywhere). Any pretrain::Error is an
// accepted outcome; a crash, a sanitizer report or another exception is a bug. It is also a
// differential test: the fast <text> scanner must give what expat alone gives, pages and errors.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/error.h"
#include "common/log.h"
#include "common/utf8.h"
#include "datagen/wikiprep/xml_pages.h"

namespace {

struct Outcome {
  std::vector<pretrain::Page> pages;
  bool failed = false;
  int64_t error_offset = -1;
};

Outcome read(std::string_view input, size_t split, bool fast) {
  using namespace pretrain;
  Outcome out;
  try {
    XmlPageReader reader("fuzz.xml", [&](Page&& p) {
      // Whatever the input, pages come out in order, as UTF-8, at offsets inside the input.
      if (p.ordinal != out.pages.size()) __builtin_trap();
      if (!is_valid_utf8(p.title) || !is_valid_utf8(p.text) || !is_valid_utf8(p.redirect_target)) __builtin_trap();
      if (p.byte_offset >= input.size()) __builtin_trap();
      out.pages.push_back(std::move(p));
    }, fast);
    reader.feed(input.substr(0, split));
    reader.feed(input.substr(split));
    reader.finish();
    (void)page_url(reader.siteinfo(), 1);
  } catch (const Error& e) {
    out.failed = true;
    out.error_offset = e.where().offset;
  }
  return out;
}

bool same(const pretrain::Page& a, const pretrain::Page& b) {
  return a.title == b.title && a.ns == b.ns && a.id == b.id && a.redirect == b.redirect &&
         a.redirect_target == b.redirect_target && a.revision_id == b.revision_id && a.text == b.text &&
         a.byte_offset == b.byte_offset;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // Quiet the reader's warnings (UTF-16 input, say): one per input filled 14 MB of log a minute.
  static bool quiet = (pretrain::set_log_level(pretrain::LogLevel::error), true);
  (void)quiet;
  if (size == 0) return 0;
  std::string_view input(reinterpret_cast<const char*>(data) + 1, size - 1);
  size_t split = input.size() * data[0] / 255;
  // The same split for both: expat itself words some errors differently for other chunkings.
  Outcome fast = read(input, split, true), reference = read(input, split, false);
  if (fast.failed != reference.failed || fast.error_offset != reference.error_offset) __builtin_trap();
  if (fast.pages.size() != reference.pages.size()) __builtin_trap();
  for (size_t i = 0; i < fast.pages.size(); ++i)
    if (!same(fast.pages[i], reference.pages[i])) __builtin_trap();
  return 0;
}
