#include "trainer/communicator.h"

#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <limits>

#include "common/error.h"

namespace pretrain {

namespace {

bool launched_by_mpirun() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"})
    if (std::getenv(v)) return true;
  return false;
}

void check(int code, const char* what) {
  if (code == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(code, text, &len);
  throw Error(cat("MPI ", what, ": ", std::string(text, size_t(len))));
}

MPI_Comm comm_of(void* c) { return static_cast<MPI_Comm>(c); }

// MPI counts are int: large buffers go in pieces.
template <typename F>
void in_pieces(int64_t n, F f) {
  const int64_t piece = std::numeric_limits<int>::max() / 8;
  for (int64_t off = 0; off < n; off += piece) f(off, int(std::min(piece, n - off)));
}

}  // namespace

Communicator::Communicator() {
  if (!launched_by_mpirun()) return;
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) {
    int provided = 0;
    // One thread at a time calls MPI: the training thread, or the gradient reducer's thread while
    // the training thread waits for it (the loader's threads never do).
    check(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided), "init");
    if (provided < MPI_THREAD_SERIALIZED) throw Error("this MPI does not offer MPI_THREAD_SERIALIZED");
    std::atexit([] {
      int finalized = 0;
      MPI_Finalized(&finalized);
      if (!finalized) MPI_Finalize();
    });
  }
  comm_ = MPI_COMM_WORLD;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &size_);
  MPI_Comm node;
  check(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &node), "split by node");
  MPI_Comm_rank(node, &local_rank_);
  MPI_Comm_free(&node);
}

Communicator& Communicator::world() {
  static Communicator c;
  return c;
}

void Communicator::all_reduce_sum(float* data, int64_t n) const {
  if (!distributed()) return;
  in_pieces(n, [&](int64_t off, int count) {
    check(MPI_Allreduce(MPI_IN_PLACE, data + off, count, MPI_FLOAT, MPI_SUM, comm_of(comm_)), "all-reduce");
  });
}

void Communicator::all_reduce_sum(double* data, int64_t n) const {
  if (!distributed()) return;
  in_pieces(n, [&](int64_t off, int count) {
    check(MPI_Allreduce(MPI_IN_PLACE, data + off, count, MPI_DOUBLE, MPI_SUM, comm_of(comm_)), "all-reduce");
  });
}

void Communicator::all_reduce_sum(int64_t* data, int64_t n) const {
  if (!distributed()) return;
  in_pieces(n, [&](int64_t off, int count) {
    check(MPI_Allreduce(MPI_IN_PLACE, data + off, count, MPI_INT64_T, MPI_SUM, comm_of(comm_)), "all-reduce");
  });
}

void Communicator::broadcast(void* data, size_t bytes, int root) const {
  if (!distributed()) return;
  in_pieces(int64_t(bytes), [&](int64_t off, int count) {
    check(MPI_Bcast(static_cast<char*>(data) + off, count, MPI_BYTE, root, comm_of(comm_)), "broadcast");
  });
}

void Communicator::barrier() const {
  if (distributed()) check(MPI_Barrier(comm_of(comm_)), "barrier");
}

void Communicator::abort(int code) const {
  std::fflush(stdout);
  std::fflush(stderr);
  if (distributed()) MPI_Abort(comm_of(comm_), code);
  std::_Exit(code);
}

void Communicator::all_gather(const void* in, void* out, size_t bytes) const {
  if (!distributed()) {
    if (bytes) std::copy_n(static_cast<const char*>(in), bytes, static_cast<char*>(out));
    return;
  }
  if (bytes > size_t(std::numeric_limits<int>::max())) throw Error("all-gather: more than 2 GB per rank");
  check(MPI_Allgather(in, int(bytes), MPI_BYTE, out, int(bytes), MPI_BYTE, comm_of(comm_)), "all-gather");
}

namespace {
std::vector<int> int_counts(const std::vector<int64_t>& counts, std::vector<int>* displs) {
  std::vector<int> out;
  int64_t at = 0;
  for (int64_t c : counts) {
    if (at + c > std::numeric_limits<int>::max()) throw Error("ZeRO collectives: more than 2^31 elements");
    out.push_back(int(c));
    if (displs) displs->push_back(int(at));
    at += c;
  }
  return out;
}
}  // namespace

void Communicator::reduce_scatter_sum(const float* in, float* out, const std::vector<int64_t>& counts) const {
  if (!distributed()) {
    std::copy_n(in, counts.at(0), out);
    return;
  }
  const std::vector<int> c = int_counts(counts, nullptr);
  check(MPI_Reduce_scatter(in, out, c.data(), MPI_FLOAT, MPI_SUM, comm_of(comm_)), "reduce-scatter");
}

void Communicator::all_gather_blocks(float* data, const std::vector<int64_t>& counts) const {
  if (!distributed()) return;
  std::vector<int> displs;
  std::vector<int> c = int_counts(counts, &displs);
  check(MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, data, c.data(), displs.data(), MPI_FLOAT, comm_of(comm_)),
        "all-gather");
}

}  // namespace pretrain
