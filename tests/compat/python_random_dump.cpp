// For test_python_random.py: prints, for seed S, a fixed mix of PythonRandom calls, one value per
// line, in the same order as the Python side makes them on random.Random(S).
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "datagen/shards/python_random.h"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: python_random_dump SEED ROUNDS\n");
    return 2;
  }
  pretrain::PythonRandom r(std::atoll(argv[1]));
  const int rounds = std::atoi(argv[2]);
  for (int i = 0; i < rounds; ++i) {
    std::printf("%.17g\n", r.random());
    std::printf("%lld\n", (long long)r.randint(0, i));
    std::printf("%lld\n", (long long)r.randint(2, 2 + (int64_t(1) << (i % 50))));
    std::printf("%llu\n", (unsigned long long)r.getrandbits(1 + i % 64));
    std::vector<int> x(i % 40);
    for (size_t k = 0; k < x.size(); ++k) x[k] = int(k);
    r.shuffle(x);
    for (int v : x) std::printf("%d ", v);
    std::printf("\n");
  }
}
