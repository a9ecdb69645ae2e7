#include "common/communicator.h"

#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <numeric>
#include <thread>

#include "common/comm_watchdog.h"
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

// A call that waits for other ranks, watched while it does (common/comm_watchdog.h).
using Watched = CommWatchdog::Call;

// "the data group (world ranks 0, 2)", "the world (ranks 0-3)".
std::string describe_group(const std::string& name, const std::vector<int>& ranks) {
  bool consecutive = true;
  for (size_t i = 1; i < ranks.size(); ++i) consecutive = consecutive && ranks[i] == ranks[i - 1] + 1;
  std::string list;
  if (ranks.size() > 2 && consecutive) {
    list = cat(ranks.front(), "-", ranks.back());
  } else {
    for (size_t i = 0; i < ranks.size() && i < 8; ++i) list += cat(i ? ", " : "", ranks[i]);
    if (ranks.size() > 8) list += cat(", … (", ranks.size(), " ranks)");
  }
  if (name == "world") return cat("the world (rank", ranks.size() == 1 ? " " : "s ", list, ")");
  return cat("the ", name, " group (world rank", ranks.size() == 1 ? " " : "s ", list, ")");
}

// Every rank's host name, by world rank: the watchdog names the hosts of the ranks it speaks of.
std::vector<std::string> host_names(int size) {
  constexpr int kLength = 256;
  char mine[kLength] = {};
  if (gethostname(mine, kLength - 1) != 0) std::snprintf(mine, kLength, "?");
  std::vector<char> all(size_t(size) * kLength);
  check(MPI_Allgather(mine, kLength, MPI_CHAR, all.data(), kLength, MPI_CHAR, MPI_COMM_WORLD), "all-gather");
  std::vector<std::string> out;
  for (int r = 0; r < size; ++r) out.emplace_back(all.data() + size_t(r) * kLength);
  return out;
}

// MPI counts are int: large buffers go in pieces.
template <typename F>
void in_pieces(int64_t n, F f) {
  const int64_t piece = std::numeric_limits<int>::max() / 8;
  for (int64_t off = 0; off < n; off += piece) f(off, int(std::min(piece, n - off)));
}

}  // namespace

Communicator::Communicator() : world_ranks_{0}, description_(describe_group("world", {0})) {
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
  world_ranks_.resize(size_t(size_));
  std::iota(world_ranks_.begin(), world_ranks_.end(), 0);
  description_ = describe_group("world", world_ranks_);
  if (size_ > 1) comm_watchdog().attach(rank_, host_names(size_));
}

Communicator::Communicator(void* comm, int rank, int size, int local_rank, std::vector<int> world_ranks,
                           const std::string& name)
    : rank_(rank), size_(size), local_rank_(local_rank), comm_(comm), world_ranks_(std::move(world_ranks)),
      description_(describe_group(name, world_ranks_)) {
  owned_ = comm != nullptr;
}

int Communicator::world_rank_of(int rank) const {
  return rank >= 0 && size_t(rank) < world_ranks_.size() ? world_ranks_[size_t(rank)] : -1;
}

Communicator::~Communicator() {
  if (!owned_) return;
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;
  MPI_Comm c = comm_of(comm_);
  MPI_Comm_free(&c);
}

std::unique_ptr<Communicator> Communicator::split(int color, int key, const std::string& name) const {
  if (!distributed() && size_ == 1 && !comm_)
    return std::unique_ptr<Communicator>(new Communicator(nullptr, 0, 1, local_rank_, world_ranks_, name));
  MPI_Comm c;
  {
    const Watched watched(comm_watchdog(), "split", description_.c_str());
    check(MPI_Comm_split(comm_of(comm_), color, key, &c), "split");
  }
  int rank = 0, size = 1;
  MPI_Comm_rank(c, &rank);
  MPI_Comm_size(c, &size);
  // Its ranks as the world numbers them, for the watchdog's messages.
  MPI_Group group, world;
  MPI_Comm_group(c, &group);
  MPI_Comm_group(MPI_COMM_WORLD, &world);
  std::vector<int> mine(static_cast<size_t>(size)), in_world(static_cast<size_t>(size));
  std::iota(mine.begin(), mine.end(), 0);
  MPI_Group_translate_ranks(group, size, mine.data(), world, in_world.data());
  MPI_Group_free(&group);
  MPI_Group_free(&world);
  return std::unique_ptr<Communicator>(new Communicator(c, rank, size, local_rank_, std::move(in_world), name));
}

Communicator& Communicator::world() {
  static Communicator c;
  return c;
}

const Communicator& Communicator::self() {
  static const Communicator c(nullptr, 0, 1, 0, {0}, "self");
  return c;
}

void Communicator::all_reduce_sum(float* data, int64_t n) const {
  if (!distributed()) return;
  const Watched watched(comm_watchdog(), "all-reduce", description_.c_str());
  in_pieces(n, [&](int64_t off, int count) {
    check(MPI_Allreduce(MPI_IN_PLACE, data + off, count, MPI_FLOAT, MPI_SUM, comm_of(comm_)), "all-reduce");
  });
}

void Communicator::all_reduce_sum(double* data, int64_t n) const {
  if (!distributed()) return;
  const Watched watched(comm_watchdog(), "all-reduce", description_.c_str());
  in_pieces(n, [&](int64_t off, int count) {
    check(MPI_Allreduce(MPI_IN_PLACE, data + off, count, MPI_DOUBLE, MPI_SUM, comm_of(comm_)), "all-reduce");
  });
}

void Communicator::all_reduce_sum(int64_t* data, int64_t n) const {
  if (!distributed()) return;
  const Watched watched(comm_watchdog(), "all-reduce", description_.c_str());
  in_pieces(n, [&](int64_t off, int count) {
    check(MPI_Allreduce(MPI_IN_PLACE, data + off, count, MPI_INT64_T, MPI_SUM, comm_of(comm_)), "all-reduce");
  });
}

void Communicator::broadcast(void* data, size_t bytes, int root) const {
  if (!distributed()) return;
  const Watched watched(comm_watchdog(), "broadcast", description_.c_str());
  in_pieces(int64_t(bytes), [&](int64_t off, int count) {
    check(MPI_Bcast(static_cast<char*>(data) + off, count, MPI_BYTE, root, comm_of(comm_)), "broadcast");
  });
}

namespace {
// Waits for a non-blocking collective, sleeping between polls (50 µs, doubling to 1 ms). A rank
// that reaches a collective long before the others (make-pretraining-shards' ranks wait for the
// slowest to finish tokenizing, or for the one writing the last shards) would spin inside a
// blocking MPI call, and where ranks share cores the spinning takes the CPU the working ranks need:
// a quarter of an mpirun -np 2 job's CPU seconds on 2 cores. The cost: the collective ends up to
// ~1 ms later. For the small collectives that coordinate; bulk data (all_reduce_sum, the ZeRO pair,
// broadcast) keeps MPI's blocking calls, which make progress while they wait.
void wait_sleeping(MPI_Request& request, const char* what) {
  for (auto pause = std::chrono::microseconds(50);; pause = std::min(2 * pause, std::chrono::microseconds(1000))) {
    int done = 0;
    check(MPI_Test(&request, &done, MPI_STATUS_IGNORE), what);
    if (done) return;
    std::this_thread::sleep_for(pause);
  }
}
}  // namespace

void Communicator::barrier() const {
  if (!distributed()) return;
  const Watched watched(comm_watchdog(), "barrier", description_.c_str());
  MPI_Request request;
  check(MPI_Ibarrier(comm_of(comm_), &request), "barrier");
  wait_sleeping(request, "barrier");
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
  const Watched watched(comm_watchdog(), "all-gather", description_.c_str());
  MPI_Request request;
  check(MPI_Iallgather(in, int(bytes), MPI_BYTE, out, int(bytes), MPI_BYTE, comm_of(comm_), &request), "all-gather");
  wait_sleeping(request, "all-gather");
}

std::vector<std::string> Communicator::all_gather_strings(const std::string& mine) const {
  if (!distributed()) return {mine};
  if (mine.size() > size_t(std::numeric_limits<int>::max() / size_)) throw Error("all-gather: strings too long");
  const int64_t n = int64_t(mine.size());
  std::vector<int64_t> sizes(static_cast<size_t>(size_));
  all_gather(&n, sizes.data(), sizeof n);
  std::vector<int> counts, displs;
  int at = 0;
  for (int64_t s : sizes) counts.push_back(int(s)), displs.push_back(at), at += int(s);
  std::string all(size_t(at), '\0');
  const Watched watched(comm_watchdog(), "all-gather of strings", description_.c_str());
  MPI_Request request;
  check(MPI_Iallgatherv(mine.data(), int(n), MPI_BYTE, all.data(), counts.data(), displs.data(), MPI_BYTE,
                        comm_of(comm_), &request),
        "all-gather");
  wait_sleeping(request, "all-gather");
  std::vector<std::string> out;
  for (size_t r = 0; r < sizes.size(); ++r) out.push_back(all.substr(size_t(displs[r]), size_t(counts[r])));
  return out;
}

std::string Communicator::broadcast_string(const std::string& s, int root) const {
  if (!distributed()) return s;
  uint64_t n = s.size();
  broadcast(&n, sizeof n, root);
  std::string out = rank_ == root ? s : std::string(n, '\0');
  broadcast(out.data(), n, root);
  return out;
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
  const Watched watched(comm_watchdog(), "reduce-scatter", description_.c_str());
  check(MPI_Reduce_scatter(in, out, c.data(), MPI_FLOAT, MPI_SUM, comm_of(comm_)), "reduce-scatter");
}

void Communicator::all_gather_blocks(float* data, const std::vector<int64_t>& counts) const {
  if (!distributed()) return;
  std::vector<int> displs;
  std::vector<int> c = int_counts(counts, &displs);
  const Watched watched(comm_watchdog(), "all-gather", description_.c_str());
  check(MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, data, c.data(), displs.data(), MPI_FLOAT, comm_of(comm_)),
        "all-gather");
}

void Communicator::all_reduce_max(float* data, int64_t n) const {
  if (!distributed()) return;
  const Watched watched(comm_watchdog(), "all-reduce (max)", description_.c_str());
  in_pieces(n, [&](int64_t off, int count) {
    check(MPI_Allreduce(MPI_IN_PLACE, data + off, count, MPI_FLOAT, MPI_MAX, comm_of(comm_)), "all-reduce max");
  });
}

void Communicator::all_gather_equal(const float* in, float* out, int64_t n) const {
  if (!distributed()) {
    if (in != out) std::copy_n(in, n, out);
    return;
  }
  if (n * size_ > std::numeric_limits<int>::max()) throw Error("all-gather: more than 2^31 elements");
  const Watched watched(comm_watchdog(), "all-gather", description_.c_str());
  check(MPI_Allgather(in, int(n), MPI_FLOAT, out, int(n), MPI_FLOAT, comm_of(comm_)), "all-gather");
}

void Communicator::reduce_scatter_equal(const float* in, float* out, int64_t n) const {
  if (!distributed()) {
    if (in != out) std::copy_n(in, n, out);
    return;
  }
  if (n * size_ > std::numeric_limits<int>::max()) throw Error("reduce-scatter: more than 2^31 elements");
  const Watched watched(comm_watchdog(), "reduce-scatter", description_.c_str());
  check(MPI_Reduce_scatter_block(in, out, int(n), MPI_FLOAT, MPI_SUM, comm_of(comm_)), "reduce-scatter");
}

namespace {
void check_bytes(size_t bytes, const char* what) {
  if (bytes > size_t(std::numeric_limits<int>::max())) throw Error(cat(what, ": more than 2 GB in one message"));
}
}  // namespace

void Communicator::send(const void* data, size_t bytes, int dest, int tag) const {
  check_bytes(bytes, "send");
  const Watched watched(comm_watchdog(), "send to", description_.c_str(), world_rank_of(dest));
  check(MPI_Send(data, int(bytes), MPI_BYTE, dest, tag, comm_of(comm_)), "send");
}

void Communicator::recv(void* data, size_t bytes, int source, int tag) const {
  check_bytes(bytes, "receive");
  MPI_Status status;
  const Watched watched(comm_watchdog(), "receive from", description_.c_str(), world_rank_of(source));
  check(MPI_Recv(data, int(bytes), MPI_BYTE, source, tag, comm_of(comm_), &status), "receive");
  int got = 0;
  MPI_Get_count(&status, MPI_BYTE, &got);
  if (size_t(got) != bytes)
    throw Error(cat("receive from rank ", source, " (tag ", tag, "): expected ", bytes, " bytes, got ", got));
}

Communicator::Request Communicator::isend(const void* data, size_t bytes, int dest, int tag) const {
  check_bytes(bytes, "send");
  Request r;
  auto* req = new MPI_Request;
  const int code = MPI_Isend(data, int(bytes), MPI_BYTE, dest, tag, comm_of(comm_), req);
  if (code != MPI_SUCCESS) delete req;
  check(code, "send");
  r.request_ = req;
  r.group_ = description_.c_str(), r.peer_ = world_rank_of(dest);
  return r;
}

Communicator::Request::Request(Request&& o) noexcept : request_(o.request_), group_(o.group_), peer_(o.peer_) {
  o.request_ = nullptr;
}
Communicator::Request& Communicator::Request::operator=(Request&& o) noexcept {
  if (this != &o) {
    if (request_) wait();
    request_ = o.request_, group_ = o.group_, peer_ = o.peer_;
    o.request_ = nullptr;
  }
  return *this;
}
Communicator::Request::~Request() {
  try {
    wait();
  } catch (...) {  // a failed send surfaces from wait(); a destructor must not throw
  }
}
void Communicator::Request::wait() {
  if (!request_) return;
  auto* req = static_cast<MPI_Request*>(request_);
  request_ = nullptr;
  const Watched watched(comm_watchdog(), "send to", group_, peer_);
  const int code = MPI_Wait(req, MPI_STATUS_IGNORE);
  delete req;
  check(code, "send");
}
bool Communicator::Request::test() {
  if (!request_) return true;
  int done = 0;
  check(MPI_Test(static_cast<MPI_Request*>(request_), &done, MPI_STATUS_IGNORE), "send");
  if (done) delete static_cast<MPI_Request*>(request_), request_ = nullptr;
  return done != 0;
}

void fault_point(const char* stage) {
  const char* e = std::getenv("PRETRAIN_FAULT");
  if (!e) return;
  const std::string spec = e;
  const size_t colon = spec.find(':');
  if (colon == std::string::npos) return;
  const std::string what = spec.substr(colon + 1);
  const bool stop = what == cat(stage, ":stop");
  if ((what != stage && !stop) || std::atoi(spec.substr(0, colon).c_str()) != Communicator::world().rank()) return;
  if (!stop) throw Error(cat(stage, ": fault injected by PRETRAIN_FAULT=", spec));
  std::fflush(stdout);
  std::raise(SIGSTOP);
}

std::optional<DirLock> lock_dir_for_job(const std::string& dir, const Communicator& group) {
  std::optional<DirLock> lock;
  std::string refused;
  if (group.rank() == 0) {
    try {
      lock.emplace(dir);
    } catch (const Error& e) {
      refused = e.what();
    }
  }
  refused = group.broadcast_string(refused, 0);
  if (!refused.empty()) throw Error(refused);
  return lock;
}

}  // namespace pretrain
