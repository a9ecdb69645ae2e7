// Runs a fuzz target over files and directories given on the command line (its seed corpus and
// any crash reproducers), so every fuzz target is also a plain regression test without libFuzzer.
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

static void run_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
}

int main(int argc, char** argv) {
  size_t runs = 0;
  for (int i = 1; i < argc; ++i) {
    std::filesystem::path p(argv[i]);
    if (std::filesystem::is_directory(p)) {
      for (const auto& e : std::filesystem::recursive_directory_iterator(p))
        if (e.is_regular_file()) run_file(e.path()), ++runs;
    } else if (std::filesystem::exists(p)) {
      run_file(p), ++runs;
    }
  }
  LLVMFuzzerTestOneInput(nullptr, 0), ++runs;  // the empty input, always
  std::printf("replayed %zu inputs\n", runs);
  return 0;
}
