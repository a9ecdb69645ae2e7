// Collectives over a group of ranks (docs/architecture.md, "Processes"): ranks are the processes mpirun
// starts: the trainers' one per device, make-pretraining-shards' each a share of the preprocessing.
// CPU tensors reduce over MPI. The trainer's world splits into the groups of the data × tensor ×
// pipeline grid (trainer/parallel/grid.h), each a Communicator of its own.
//
// A process not started by mpirun (no OMPI_COMM_WORLD_SIZE / PMI_SIZE in its environment) is a
// group of one and never initialises MPI, so the single-process tools start instantly.
//
// Every call that waits for other ranks is watched (common/comm_watchdog.h): past --comm-timeout
// the process ends, naming the call, this group and, for point to point, the peer.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/file.h"

namespace pretrain {

class Communicator {
 public:
  // The world (initialises MPI on first use when launched by mpirun; finalised at exit).
  static Communicator& world();
  // This process alone: a group of one, whether or not mpirun started it.
  static const Communicator& self();
  // The data-parallel group of a run without tensor or pipeline parallelism: the world.
  static Communicator& data_parallel() { return world(); }
  ~Communicator();
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;
  // The ranks with the same color, ordered by key (MPI_Comm_split: a collective); a group of one
  // when not distributed. `name` says which group it is in the watchdog's messages ("data").
  std::unique_ptr<Communicator> split(int color, int key, const std::string& name = "sub") const;

  int rank() const { return rank_; }
  int size() const { return size_; }
  int local_rank() const { return local_rank_; }  // this rank's index on its node (picks the GPU)
  bool distributed() const { return size_ > 1; }
  // "the data group (world ranks 0, 2)": what the watchdog's messages call it.
  const std::string& description() const { return description_; }
  int world_rank_of(int rank) const;  // a rank of this group, as the world numbers it

  // In place: data = Σ over ranks (every rank gets the same bits).
  void all_reduce_sum(float* data, int64_t n) const;
  void all_reduce_sum(double* data, int64_t n) const;
  void all_reduce_sum(int64_t* data, int64_t n) const;
  void broadcast(void* data, size_t bytes, int root) const;
  // barrier, all_gather and all_gather_strings wait without spinning (they sleep between polls, so
  // a rank that waits long leaves its core to the working ones, and the call may end ~1 ms late).
  void barrier() const;
  // Ends every rank of the job with `code` (MPI_Abort): what a rank that fails alone must do, or the
  // others wait in their next collective forever (and MPI_Finalize waits for them).
  [[noreturn]] void abort(int code) const;
  // Every rank's `bytes` bytes, in rank order, into out (size() × bytes).
  void all_gather(const void* in, void* out, size_t bytes) const;
  // Every rank's string, of any length, in rank order (a group of one: {mine}).
  std::vector<std::string> all_gather_strings(const std::string& mine) const;
  // Root's string on every rank.
  std::string broadcast_string(const std::string& s, int root) const;
  // ZeRO-1's pair over a flat array cut into size() consecutive blocks of counts[r] elements:
  // out (counts[rank()] elements) = Σ over ranks of this rank's block of `in`; and in place,
  // every rank's block of `data` from its owner.
  void reduce_scatter_sum(const float* in, float* out, const std::vector<int64_t>& counts) const;
  void all_gather_blocks(float* data, const std::vector<int64_t>& counts) const;
  void all_reduce_max(float* data, int64_t n) const;
  // Equal blocks: out (size() · n) = every rank's n floats in rank order; and out (n) = Σ over
  // ranks of block rank() of in (size() · n).
  void all_gather_equal(const float* in, float* out, int64_t n) const;
  void reduce_scatter_equal(const float* in, float* out, int64_t n) const;

  // Point to point between ranks of this group (tags below 32768). recv checks the size.
  class Request {
   public:
    Request() = default;
    Request(Request&& o) noexcept;
    Request& operator=(Request&& o) noexcept;
    ~Request();
    void wait();
    bool test();  // done (then nothing is left to wait for)
   private:
    friend class Communicator;
    void* request_ = nullptr;  // MPI_Request, heap-allocated
    const char* group_ = nullptr;  // for the watchdog: the communicator's description
    int peer_ = -1;                // and the destination's world rank
  };
  void send(const void* data, size_t bytes, int dest, int tag) const;
  void recv(void* data, size_t bytes, int source, int tag) const;
  Request isend(const void* data, size_t bytes, int dest, int tag) const;  // data must outlive the request

 private:
  Communicator();
  Communicator(void* comm, int rank, int size, int local_rank, std::vector<int> world_ranks, const std::string& name);
  bool owned_ = false;
  int rank_ = 0, size_ = 1, local_rank_ = 0;
  void* comm_ = nullptr;  // MPI_Comm, when distributed
  std::vector<int> world_ranks_;  // by rank in this group
  std::string description_;
};

// A test seam of the tools that run under mpirun: PRETRAIN_FAULT=RANK:STAGE makes that rank of the
// world throw an Error as `stage` begins (the tests check that one failing rank ends the whole job,
// naming itself); PRETRAIN_FAULT=RANK:STAGE:stop makes it stop itself there (SIGSTOP: a stalled
// peer, which the others' watchdogs must end). Does nothing without the variable.
void fault_point(const char* stage);

// An output directory's lock (DirLock) for a whole job: its rank 0 takes it and every rank learns
// the outcome before anyone writes, so one job runs alone in the directory while its own ranks
// share it. When it is refused every rank throws the same Error (naming the directory and the
// holder's pid). A collective; the lock lives in rank 0's return value.
std::optional<DirLock> lock_dir_for_job(const std::string& dir, const Communicator& group);

}  // namespace pretrain
