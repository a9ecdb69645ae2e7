// Fuzz target for the whole wikiprep pipeline (parallel bz2 → XML pages → wikitext cleaner →
// shards + manifest). Byte 0 picks the variant: bit 0 = --format sentences, bit 1 = the rest is
// bz2-compressed first (so the block scanner and decoder see real streams around fuzzed XML),
// bit 2 = keep redirects. Any pretrain::Error is an accepted outcome; a crash, a sanitizer report,
// another exception, or a successful run whose manifest does not match its shards is a bug.
#include <bzlib.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "common/error.h"
#include "common/log.h"
#include "common/manifest.h"
#include "common/progress.h"
#include "datagen/wikiprep/wikiprep.h"
#include "fuzz_util.h"

namespace {

std::string bz2_compress(const uint8_t* data, size_t size) {
  std::vector<char> out(size + size / 100 + 700);
  unsigned int n = static_cast<unsigned int>(out.size());
  if (BZ2_bzBuffToBuffCompress(out.data(), &n, reinterpret_cast<char*>(const_cast<uint8_t*>(data)),
                               static_cast<unsigned int>(size), 1, 0, 0) != BZ_OK)
    __builtin_trap();
  return std::string(out.data(), n);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace pretrain;
  static bool quiet = [] {
    set_log_level(LogLevel::error);
    Progress::set_enabled(false);
    return true;
  }();
  (void)quiet;
  if (size < 1 || size > (1 << 20)) return 0;
  const uint8_t mode = data[0];
  static fuzz::ScratchFile input_xml("wikiprep", ".xml"), input_bz2("wikiprep", ".xml.bz2");
  const fuzz::ScratchFile& input = (mode & 2) ? input_bz2 : input_xml;
  input.write((mode & 2) ? bz2_compress(data + 1, size - 1)
                         : std::string(reinterpret_cast<const char*>(data + 1), size - 1));
  static const std::string out_dir = fuzz::scratch_dir() + "/fuzz-wikiprep-out-" + std::to_string(::getpid());
  std::filesystem::remove_all(out_dir);

  WikiprepOptions o;
  o.input = input.path();
  o.output_dir = out_dir;
  o.format = (mode & 1) ? WikiprepFormat::sentences : WikiprepFormat::jsonl;
  o.keep_redirects = mode & 4;
  o.shard_bytes = 2048;  // small shards: rotation happens on small inputs too
  bool ok = true;
  try {
    run_wikiprep(o);
  } catch (const Error&) {
    ok = false;
  }
  if (ok) {
    // A successful run's manifest describes exactly the shards on disk.
    Manifest m = Manifest::read(out_dir + "/manifest.json");
    if (!m.complete || !verify_manifest(m, out_dir).empty()) __builtin_trap();
  }
  std::filesystem::remove_all(out_dir);
  return 0;
}
