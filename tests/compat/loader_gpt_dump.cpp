// Dumps the loader's GPT samples, for tests/compat/test_loader_megatron.py to compare with
// Megatron-LM's GPTDataset and BlendedDataset.
//
//   loader_gpt_dump OUT SEQ_LEN SEED EPOCHS WEIGHTS SOURCE...
//       WEIGHTS: "-" (no blend) or comma-separated, one per source. Writes the seq_len + 1 tokens
//       of every sample of epochs 0 … EPOCHS-1, in order, as little-endian int64 to OUT, and
//       prints the samples per epoch.
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "common/cli.h"
#include "common/error.h"
#include "common/file.h"
#include "loader/source.h"

using namespace pretrain;

int main(int argc, char** argv) {
  return run_reporting_errors([&] {
    if (argc < 7) throw UsageError("usage: loader_gpt_dump OUT SEQ_LEN SEED EPOCHS WEIGHTS SOURCE...");
    LoaderConfig config;
    config.kind = ModelKind::gpt;
    for (int i = 6; i < argc; ++i) config.sources.push_back(argv[i]);
    GptSourceOptions o;
    o.sets = resolve_sources(config);
    o.seq_len = std::stoll(argv[2]);
    o.seed = std::stoull(argv[3]);
    const uint64_t epochs = std::stoull(argv[4]);
    if (std::string(argv[5]) != "-") {
      std::stringstream list(argv[5]);
      for (std::string w; std::getline(list, w, ',');) o.weights.push_back(std::stod(w));
    }
    auto source = make_gpt_source(o);
    const int64_t n = int64_t(source->samples_per_epoch());
    const SlotLayout layout = SlotLayout::make(ModelKind::gpt, n, o.seq_len, 0, 0, false);
    std::vector<uint8_t> slot(layout.bytes);
    HostRows rows(layout, slot.data());
    AtomicFile out(argv[1]);
    for (uint64_t e = 0; e < epochs; ++e) {
      for (int64_t p = 0; p < n; ++p) source->read(e, uint64_t(p), rows, p);
      const int32_t* tokens = rows.array<int32_t>(layout.tokens);
      std::vector<int64_t> wide(tokens, tokens + n * layout.token_row());
      out.write(wide.data(), wide.size() * sizeof(int64_t));
    }
    out.commit();
    std::printf("%lld\n", static_cast<long long>(n));
    return 0;
  });
}
