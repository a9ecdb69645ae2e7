// Writes a Megatron dataset with our writer, for tests/compat/test_megatron.py to read with a
// numpy reader that follows Megatron's _IndexReader.
//
//   megatron_write_dataset random PREFIX uint16|int32 SEED
//       deterministic random documents (empty sequences and empty documents included); writes
//       PREFIX.bin/.idx and PREFIX.json with "sequences" and "document_indices" to check against;
//       for uint16 also PREFIX.llmc.bin, the same data converted to an llm.c shard.
//   megatron_write_dataset json GOLDEN_JSON PREFIX uint16|int32
//       the golden recipe: add_sequence per sequence, end_document per document.
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/cli.h"
#include "common/error.h"
#include "common/file.h"
#include "formats/llmc.h"
#include "formats/megatron.h"

using namespace pretrain;

static MegatronDType parse_dtype(const std::string& s) {
  if (s == "uint16") return MegatronDType::u16;
  if (s == "int32") return MegatronDType::i32;
  throw UsageError(cat("dtype must be uint16 or int32, not '", s, "'"));
}

static void write_random(const std::string& prefix, MegatronDType dtype, uint64_t seed) {
  std::mt19937_64 rng(seed);
  const bool u16 = dtype == MegatronDType::u16;
  MegatronWriter w(prefix, dtype);
  nlohmann::json sequences = nlohmann::json::array();
  std::vector<int64_t> document_indices = {0};
  for (int d = 0; d < 300; ++d) {
    const int n = rng() % 9 == 0 ? 0 : int(rng() % 6);
    for (int s = 0; s < n; ++s) {
      std::vector<int32_t> seq(rng() % 7 == 0 ? 0 : rng() % 400);
      // uint16: GPT-2 ids below EOT (so the llm.c conversion adds one EOT per document);
      // int32: the whole range, negative ids included.
      for (auto& t : seq) t = u16 ? int32_t(rng() % 50256) : int32_t(uint32_t(rng()));
      w.add_sequence(seq);
      sequences.push_back(seq);
    }
    w.end_document();
    document_indices.push_back(int64_t(sequences.size()));
  }
  w.finalize();
  nlohmann::json expected = {{"sequences", sequences}, {"document_indices", document_indices}};
  write_file_atomic(prefix + ".json", expected.dump());
  if (u16) convert_megatron_to_llmc(prefix, prefix + ".llmc.bin");
}

static void write_from_json(const std::string& json_path, const std::string& prefix, MegatronDType dtype) {
  const auto meta = nlohmann::json::parse(read_file(json_path));
  const auto sequences = meta.at("sequences").get<std::vector<std::vector<int32_t>>>();
  MegatronWriter w(prefix, dtype);
  size_t k = 0;
  for (size_t n : meta.at("document_sizes_in_sequences").get<std::vector<size_t>>()) {
    for (size_t i = 0; i < n; ++i) w.add_sequence(sequences.at(k++));
    w.end_document();
  }
  w.finalize();
}

int main(int argc, char** argv) {
  return run_reporting_errors([&] {
    std::vector<std::string> a(argv + 1, argv + argc);
    if (a.size() == 4 && a[0] == "random") write_random(a[1], parse_dtype(a[2]), std::stoull(a[3]));
    else if (a.size() == 4 && a[0] == "json") write_from_json(a[1], a[2], parse_dtype(a[3]));
    else throw UsageError("usage: megatron_write_dataset random PREFIX DTYPE SEED | json GOLDEN_JSON PREFIX DTYPE");
    return 0;
  });
}
