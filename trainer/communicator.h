// Collectives over the data-parallel group (DESIGN.md, "Processes"): ranks are the processes
// mpirun starts, one per device. CPU tensors reduce over MPI. The group is a grid
// data × tensor × pipeline whose tensor and pipeline sizes are 1 for now: data_parallel() is
// the whole world, and other parallelisms will take sub-communicators of the same grid.
//
// A process not started by mpirun (no OMPI_COMM_WORLD_SIZE / PMI_SIZE in its environment) is a
// group of one and never initialises MPI, so the single-process tools start instantly.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace pretrain {

class Communicator {
 public:
  // The world (initialises MPI on first use when launched by mpirun; finalised at exit).
  static Communicator& world();
  // The data-parallel group of this rank's grid (today: the world).
  static Communicator& data_parallel() { return world(); }

  int rank() const { return rank_; }
  int size() const { return size_; }
  int local_rank() const { return local_rank_; }  // this rank's index on its node (picks the GPU)
  bool distributed() const { return size_ > 1; }

  // In place: data = Σ over ranks (every rank gets the same bits).
  void all_reduce_sum(float* data, int64_t n) const;
  void all_reduce_sum(double* data, int64_t n) const;
  void all_reduce_sum(int64_t* data, int64_t n) const;
  void broadcast(void* data, size_t bytes, int root) const;
  void barrier() const;
  // Ends every rank of the job with `code` (MPI_Abort): what a rank that fails alone must do, or the
  // others wait in their next collective forever (and MPI_Finalize waits for them).
  [[noreturn]] void abort(int code) const;
  // Every rank's `bytes` bytes, in rank order, into out (size() × bytes).
  void all_gather(const void* in, void* out, size_t bytes) const;
  // ZeRO-1's pair over a flat array cut into size() consecutive blocks of counts[r] elements:
  // out (counts[rank()] elements) = Σ over ranks of this rank's block of `in`; and in place,
  // every rank's block of `data` from its owner.
  void reduce_scatter_sum(const float* in, float* out, const std::vector<int64_t>& counts) const;
  void all_gather_blocks(float* data, const std::vector<int64_t>& counts) const;

 private:
  Communicator();
  int rank_ = 0, size_ = 1, local_rank_ = 0;
  void* comm_ = nullptr;  // MPI_Comm, when distributed
};

}  // namespace pretrain
