// What each rank of an mpirun job is told about where it runs, as our tools see it: its rank, the
// name of its host and its local rank (Communicator::local_rank, the rank among those on the same
// node, by which a trainer rank picks its GPU). Rank 0 prints one line per rank, in rank order.
// tests/e2e/test_multi_host.py runs it across hosts.
#include <unistd.h>

#include <cstdio>

#include "common/communicator.h"
#include "common/error.h"

int main() {
  const pretrain::Communicator& world = pretrain::Communicator::world();
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  const std::vector<std::string> lines = world.all_gather_strings(
      pretrain::cat("rank ", world.rank(), " of ", world.size(), ": host ", host, ", local rank ", world.local_rank()));
  if (world.rank() == 0)
    for (const std::string& line : lines) std::puts(line.c_str());
  return 0;
}
