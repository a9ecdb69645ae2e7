// Fuzz target: arbitrary bytes as a BERT HDF5 shard. HDF5 opens files by name, so the input goes
// to a per-process temp file first. Any pretrain::Error is a fine answer; a crash, a sanitizer
// report or any other exception is a bug.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <string>

#include "common/error.h"
#include "common/file.h"
#include "formats/bert_hdf5.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const pretrain::fuzz::ScratchFile scratch("bert_hdf5", ".hdf5");
  const std::string& path = scratch.path();
  scratch.write(std::string_view(reinterpret_cast<const char*>(data), size));
  try {
    pretrain::BertShardReader reader(path);
    // Headers may claim 2^40 fill-value records; a few thousand show every code path.
    const int64_t n = std::min<int64_t>(reader.size(), 4096);
    pretrain::BertBatch batch;
    for (int64_t begin = 0; begin < n; begin += 300) reader.read_range(begin, std::min<int64_t>(300, n - begin), batch);
    if (n > 0) reader.read(n - 1);
  } catch (const pretrain::Error&) {
  }
  try {
    pretrain::BertShardReader reader(path, pretrain::BertReadPath::hyperslab);
    pretrain::BertBatch batch;
    reader.read_range(0, std::min<int64_t>(reader.size(), 1000), batch);
  } catch (const pretrain::Error&) {
  }
  std::remove(path.c_str());
  return 0;
}
