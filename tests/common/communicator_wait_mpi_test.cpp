// The Communicator's small collectives (barrier, all_gather, all_gather_strings) on real ranks,
// one of them late: the others wait without spinning, so on a node whose cores the ranks share
// (make-pretraining-shards under mpirun) a waiting rank leaves its core to the working ones. ctest
// runs this under `mpirun -np 4` (label "mpi").
#include <time.h>

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "common/communicator.h"

namespace pretrain {
namespace {

double process_cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return double(t.tv_sec) + 1e-9 * double(t.tv_nsec);
}

// The CPU seconds this rank spends in `collective` while rank 0 comes 0.8 s late.
template <typename F>
double cpu_waiting_for_rank0(const Communicator& world, F&& collective) {
  world.barrier();
  const double before = process_cpu_seconds();
  if (world.rank() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(800));
  collective();
  return process_cpu_seconds() - before;
}

// Before, MPI's blocking calls spun: each waiting rank burned what the oversubscribed cores gave it
// (0.11-0.12 CPU s of the 0.8 s on 2 loaded cores, more on idle ones); sleeping between polls it
// spends a few ms.
TEST(Communicator, ARankWaitingForALateOneLeavesItsCore) {
  const Communicator& world = Communicator::world();
  if (world.size() < 2) GTEST_SKIP() << "run under mpirun (ctest runs -np 4)";
  const int r = world.rank(), n = world.size();
  constexpr double kMaxCpu = 0.05;

  const double barrier = cpu_waiting_for_rank0(world, [&] { world.barrier(); });
  std::vector<int64_t> all(size_t(n), -1);
  const int64_t mine = 100 + r;
  const double gather = cpu_waiting_for_rank0(world, [&] { world.all_gather(&mine, all.data(), sizeof mine); });
  std::vector<std::string> strings;
  const double gather_strings =
      cpu_waiting_for_rank0(world, [&] { strings = world.all_gather_strings(std::string(size_t(r) * 3, char('a' + r))); });

  for (int k = 0; k < n; ++k) {
    EXPECT_EQ(all[size_t(k)], 100 + k);
    EXPECT_EQ(strings[size_t(k)], std::string(size_t(k) * 3, char('a' + k)));
  }
  if (r != 0) {
    EXPECT_LT(barrier, kMaxCpu) << "rank " << r << " spun in barrier";
    EXPECT_LT(gather, kMaxCpu) << "rank " << r << " spun in all_gather";
    EXPECT_LT(gather_strings, kMaxCpu) << "rank " << r << " spun in all_gather_strings";
  }
}

}  // namespace
}  // namespace pretrain
