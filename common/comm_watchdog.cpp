#include "common/comm_watchdog.h"

#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>

#include "common/error.h"

namespace pretrain {

void add_comm_timeout_option(CLI::App& app, double& seconds) {
  app.add_option("--comm-timeout", seconds,
                 "under mpirun: end the job when a collective or transfer between ranks has waited this many "
                 "seconds (a peer stopped, hung or cut off), naming the rank, host, operation, group and step "
                 "or stage; 0: wait forever")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
}

CommWatchdog::CommWatchdog(Clock clock, Expire expire, bool threaded)
    : clock_(std::move(clock)), expire_(std::move(expire)), threaded_(threaded) {}

CommWatchdog::~CommWatchdog() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void CommWatchdog::set_timeout(double seconds) {
  if (!(seconds >= 0)) throw UsageError(cat("--comm-timeout must be 0 or more seconds, not ", seconds));
  timeout_ns_.store(int64_t(seconds * 1e9), std::memory_order_relaxed);
  std::lock_guard<std::mutex> lock(mu_);
  start_if_ready();
  cv_.notify_all();  // the thread's pause follows the timeout
}

void CommWatchdog::attach(int rank, std::vector<std::string> hosts) {
  std::lock_guard<std::mutex> lock(mu_);
  rank_ = rank, hosts_ = std::move(hosts);
  start_if_ready();
}

void CommWatchdog::start_if_ready() {
  if (threaded_ && !thread_.joinable() && rank_ >= 0 && timeout_ns_.load(std::memory_order_relaxed) > 0)
    thread_ = std::thread([this] { run(); });
}

void CommWatchdog::run() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_ && !expired_) {
    const int64_t timeout = timeout_ns_.load(std::memory_order_relaxed);
    const int64_t pause = std::clamp<int64_t>(timeout / 5, 10'000'000, 1'000'000'000);
    cv_.wait_for(lock, std::chrono::nanoseconds(pause));
    if (stop_) break;
    lock.unlock();
    check();
    lock.lock();
  }
}

CommWatchdog::Call::Call(CommWatchdog& w, const char* operation, const char* group, int peer) {
  if (w.timeout_ns_.load(std::memory_order_relaxed) == 0) return;
  thread_local int hint = 0;  // the slot this thread took last: free again, unless calls nest
  for (int k = 0; k < kSlots; ++k) {
    const int i = (hint + k) % kSlots;
    Slot& s = w.slots_[i];
    if (s.busy.load(std::memory_order_relaxed) || s.busy.exchange(true, std::memory_order_acquire)) continue;
    hint = i;
    // Release stores (plain moves on x86; no fences, which TSan cannot model): a reader that
    // sees one of these fields and then looks at since_ns again sees at least the 0 the slot's
    // last call left there.
    s.operation.store(operation, std::memory_order_release);
    s.group.store(group, std::memory_order_release);
    s.peer.store(peer, std::memory_order_release);
    s.since_ns.store(std::max<int64_t>(1, w.clock_()), std::memory_order_release);
    slot_ = &s;
    return;
  }
  // More calls in flight than slots: this one goes unwatched (the others still are).
}

CommWatchdog::Call::~Call() {
  if (!slot_) return;
  slot_->since_ns.store(0, std::memory_order_release);
  slot_->busy.store(false, std::memory_order_release);
}

void CommWatchdog::add_probe(DeviceProbe* probe) {
  std::lock_guard<std::mutex> lock(mu_);
  probes_.push_back(probe);
}

void CommWatchdog::remove_probe(DeviceProbe* probe) {
  std::lock_guard<std::mutex> lock(mu_);
  probes_.erase(std::remove(probes_.begin(), probes_.end(), probe), probes_.end());
}

std::string CommWatchdog::message(const char* operation, const std::string& group, int peer, double waited) const {
  auto host_of = [&](int r) { return size_t(r) < hosts_.size() ? hosts_[size_t(r)] : std::string("?"); };
  std::string where;
  const int64_t step = step_.load(std::memory_order_relaxed);
  const char* stage = stage_.load(std::memory_order_relaxed);
  if (step >= 0) where = cat(" at step ", step, stage ? cat(" (", stage, ")") : std::string());
  else if (stage) where = cat(" in stage ", stage);
  char seconds[32], limit[32];
  std::snprintf(seconds, sizeof seconds, "%.1f", waited);
  std::snprintf(limit, sizeof limit, "%g", timeout());
  return cat("rank ", rank_, " of ", hosts_.size(), " (host ", host_of(rank_), "): ", operation,
             peer >= 0 ? cat(" world rank ", peer, " (host ", host_of(peer), ")") : std::string(), " over ", group,
             " has waited ", seconds, " s", where, ", past --comm-timeout ", limit,
             ": a peer is stopped, hung or unreachable; ending the job (--resume continues from the last checkpoint)");
}

bool CommWatchdog::check() {
  std::unique_lock<std::mutex> lock(mu_);
  const int64_t timeout = timeout_ns_.load(std::memory_order_relaxed);
  if (expired_ || timeout == 0) return false;
  const int64_t now = clock_();
  // The call or device work that has waited longest, if past the timeout.
  int64_t since = 0;
  const char* operation = nullptr;
  std::string group;
  int peer = -1;
  for (Slot& s : slots_) {
    const int64_t t = s.since_ns.load(std::memory_order_acquire);
    if (t == 0 || now - t < timeout || (since && t >= since)) continue;
    // Acquire loads keep the second look at since_ns after them.
    const char* op = s.operation.load(std::memory_order_acquire);
    const char* g = s.group.load(std::memory_order_acquire);
    const int p = s.peer.load(std::memory_order_acquire);
    if (s.since_ns.load(std::memory_order_relaxed) != t) continue;  // it ended while we read it
    since = t, operation = op, group = g ? g : "?", peer = p;
  }
  std::string device_operation;
  for (DeviceProbe* probe : probes_) {
    const std::optional<Pending> p = probe->oldest_pending();
    if (!p || now - p->since_ns < timeout || (since && p->since_ns >= since)) continue;
    since = p->since_ns, device_operation = p->operation, operation = device_operation.c_str(), group = p->group;
    peer = -1;
  }
  if (!since) return false;
  expired_ = true;
  const std::string text = message(operation, group, peer, double(now - since) * 1e-9);
  lock.unlock();
  expire_(text);
  return true;
}

namespace {

int64_t coarse_monotonic_ns() {
  timespec t{};
  clock_gettime(CLOCK_MONOTONIC_COARSE, &t);
  return int64_t(t.tv_sec) * 1'000'000'000 + t.tv_nsec;
}

// The process's end: stderr first (write(2): no stdio lock, which a stuck thread may hold), then
// what stdout holds of the log, flushed by a thread of its own given a second, then _exit.
[[noreturn]] void end_process(const std::string& message) {
  const std::string line = "error: " + message + "\n";
  for (size_t at = 0; at < line.size();) {
    const ssize_t n = ::write(2, line.data() + at, line.size() - at);
    if (n <= 0) break;
    at += size_t(n);
  }
  auto flushed = std::make_shared<std::atomic<bool>>(false);
  std::thread([flushed] {
    std::fflush(stdout);
    flushed->store(true);
  }).detach();
  for (int i = 0; i < 100 && !flushed->load(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ::_exit(1);
}

}  // namespace

CommWatchdog& comm_watchdog() {
  static CommWatchdog* const watchdog = new CommWatchdog(coarse_monotonic_ns, end_process);
  return *watchdog;
}

}  // namespace pretrain
