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

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string path = "/tmp/fuzz_bert_hdf5-" + std::to_string(::getpid()) + ".hdf5";
  {
    std::FILE* f = std::fopen(path.c_str(), "wb");
    if (!f) return 0;
    if (size) std::fwrite(data, 1, size, f);
    std::fclose(f);
  }
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
