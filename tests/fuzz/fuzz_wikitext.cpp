// Fuzz target for the wikitext cleaner: any bytes. It must not crash or hang (the scanners are
// linear, so libFuzzer's timeout catches any blowup), valid UTF-8 in must give valid UTF-8 out, and
// the output keeps its shape: no control bytes but '\n', no empty lines, no spaces at line ends.
#include <cstdint>
#include <string>
#include <string_view>

#include "common/utf8.h"
#include "datagen/wikiprep/wikitext.h"

namespace {

void check(std::string_view in, const std::string& out) {
  if (pretrain::is_valid_utf8(in) && !pretrain::is_valid_utf8(out)) __builtin_trap();
  if (!out.empty() && (out.front() == '\n' || out.back() == '\n')) __builtin_trap();
  for (size_t i = 0; i < out.size(); ++i) {
    auto c = static_cast<uint8_t>(out[i]);
    if (c < 0x20 && c != '\n') __builtin_trap();
    if (c == '\n' && (out[i - 1] == '\n' || out[i - 1] == ' ' || out[i + 1] == ' ')) __builtin_trap();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const pretrain::WikitextCleaner defaults;
  static const pretrain::WikitextCleaner wikiextractor_like([] {
    pretrain::WikitextOptions o;
    o.keep_lists = false;
    o.heading_period = true;
    o.drop_interlanguage = false;
    o.file_namespaces = {"Ficheiro"};
    return o;
  }());
  std::string_view in(reinterpret_cast<const char*>(data), size);
  std::string out;
  defaults.clean(in, out);
  check(in, out);
  wikiextractor_like.clean(in, out);
  check(in, out);
  return 0;
}
