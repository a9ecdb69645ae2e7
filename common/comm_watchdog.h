// A watchdog for stalled communication (docs/architecture.md, "Processes"). OpenMPI's TCP path does
// not notice a lost peer: a collective whose peer is gone (a host cut off, a process stopped) waits
// forever, and so does mpirun. So every rank watches its own calls: each collective and
// point-to-point call marks itself in flight (CommWatchdog::Call: a clock read and a few atomic
// stores, nothing when the watchdog is off), device work the host does not wait on (NCCL) is polled
// through a DeviceProbe, and a thread that wakes about once a second ends the process when one of
// them has waited longer than --comm-timeout, saying what waited: rank, host, operation, group,
// peer, and the step or stage. Ranks on both sides of a cut link end by themselves.
//
// It ends the process with exit 1, no MPI call: mpirun ends the whole job when a rank exits
// non-zero (about a second here, through the same daemon MPI_Abort would use). MPI_Abort from the
// watchdog's thread while the rank's own thread is blocked in MPI breaks MPI_THREAD_SERIALIZED
// (tried: OpenMPI's abort message reached mpirun garbled), and may itself hang when the network
// is gone.
//
// Like NCCL's and PyTorch's watchdogs it bounds each single wait, so the timeout must exceed the
// longest legitimate one: a rank waiting while rank 0 writes a checkpoint, or while the slowest
// rank finishes its share of a data-preparation stage (kCommTimeoutTrainer, kCommTimeoutDatagen).
//
// A host cut off is also seen by OpenMPI's daemons where TCP keepalive is on (oob_tcp_keepalive_*):
// measured on two network-namespace hosts, that ends mpirun and both sides' ranks ~20 s after the
// cut with keepalive 10+5x3 s. Set the timeout above that detection: once a rank has exited, mpirun
// has a kill order queued to the lost host's daemon, keepalive no longer applies to a connection
// with data in flight, and mpirun waits until TCP gives up (net.ipv4.tcp_retries2: 982 s at the
// default 15, 35 s at 6) or a second signal (SIGTERM then ends it at once). The watchdog is what
// ends a stopped or hung process, or a hung device, which the network does not show.
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>

namespace pretrain {

// The tools' defaults, in seconds. Trainers: a step's collectives come milliseconds to seconds
// apart; the longest legitimate wait is the other ranks' barrier while world rank 0 writes a
// checkpoint (weights and both Adam moments, 12 bytes a parameter: 18 GB for 1.5 B parameters,
// 3 minutes at 100 MB/s). PyTorch's NCCL groups and Megatron-LM wait 10 minutes; 5 ends a job that
// lost a peer sooner and still covers that save. Data preparation: ranks wait at each stage's end
// for the slowest rank's share (equal bytes, not equal time: a part of the dump with longer pages,
// a slower host), minutes on a whole Wikipedia; 30 minutes, PyTorch's default for its CPU (Gloo)
// groups.
inline constexpr double kCommTimeoutTrainer = 300, kCommTimeoutDatagen = 1800;

// --comm-timeout SECONDS for a tool run under mpirun, with the same help everywhere.
void add_comm_timeout_option(CLI::App& app, double& seconds);

class CommWatchdog {
  struct Slot;  // a call in flight (below)

 public:
  using Clock = std::function<int64_t()>;                   // monotonic nanoseconds
  using Expire = std::function<void(const std::string&)>;  // the message; the process's does not return

  // `threaded`: a thread checks about once a second (a fifth of the timeout when that is shorter)
  // from the moment the process is attached and a timeout is set; without it only check() does.
  CommWatchdog(Clock clock, Expire expire, bool threaded = true);
  ~CommWatchdog();  // stops the thread
  CommWatchdog(const CommWatchdog&) = delete;
  CommWatchdog& operator=(const CommWatchdog&) = delete;

  // 0 (the default): off, no call is watched. Starts the thread once the process is attached.
  void set_timeout(double seconds);
  double timeout() const { return double(timeout_ns_.load(std::memory_order_relaxed)) * 1e-9; }
  // The process's world rank and every rank's host, by world rank, once the process is known to be
  // one of several ranks (Communicator::world() says). Starts the thread once a timeout is set.
  void attach(int rank, std::vector<std::string> hosts);
  // Where the process is, for the message: the trainer's step (-1: none) and a stage name (a
  // string that lives as long as the process: a literal).
  void set_step(int64_t step) { step_.store(step, std::memory_order_relaxed); }
  void set_stage(const char* stage) { stage_.store(stage, std::memory_order_relaxed); }

  // A call that waits for peers, in flight from construction to destruction. `group` describes
  // the communicator ("the data group (world ranks 0, 2)") and must outlive the call; `peer` is
  // the other side's world rank for point to point, -1 for a collective. Calls nest and may be
  // made by several threads at once (the gradient reducer's beside the trainer's).
  class Call {
   public:
    Call(CommWatchdog& watchdog, const char* operation, const char* group, int peer = -1);
    ~Call();
    Call(const Call&) = delete;
    Call& operator=(const Call&) = delete;

   private:
    Slot* slot_ = nullptr;
  };

  // Work queued on a device that the host does not wait on (NCCL's collectives run on a stream):
  // the watchdog asks each probe, from its thread, for the oldest piece not done yet.
  struct Pending {
    int64_t since_ns = 0;  // when it was queued, on the watchdog's clock
    std::string operation, group;
  };
  class DeviceProbe {
   public:
    virtual ~DeviceProbe() = default;
    virtual std::optional<Pending> oldest_pending() = 0;
  };
  void add_probe(DeviceProbe* probe);
  void remove_probe(DeviceProbe* probe);  // waits for a check in progress

  // Looks at what is in flight and expires when something waited past the timeout: at most once
  // in the watchdog's life. Returns whether it expired now. The thread calls it; tests call it with
  // a clock of their own.
  bool check();
  int64_t now() const { return clock_(); }

 private:
  std::string message(const char* operation, const std::string& group, int peer, double waited) const;
  void start_if_ready();
  void run();

  // One call in flight: since_ns is 0 when the slot is free, and is stored last (release), so a
  // reader that sees it sees the rest; the reader checks it again after reading the rest. A cache
  // line each: two threads' calls do not share one.
  struct alignas(64) Slot {
    std::atomic<bool> busy{false};
    std::atomic<int64_t> since_ns{0};
    std::atomic<const char*> operation{nullptr}, group{nullptr};
    std::atomic<int> peer{-1};
  };
  static constexpr int kSlots = 16;  // calls in flight at once: nested ones, the reducer's thread
  Slot slots_[kSlots];
  Clock clock_;
  Expire expire_;
  std::atomic<int64_t> timeout_ns_{0};
  std::atomic<int64_t> step_{-1};
  std::atomic<const char*> stage_{nullptr};
  const bool threaded_;
  int rank_ = -1;
  std::vector<std::string> hosts_;
  std::mutex mu_;  // probes_, stop_, the thread; check() holds it while it asks the probes
  std::condition_variable cv_;
  std::vector<DeviceProbe*> probes_;
  bool expired_ = false, stop_ = false;
  std::thread thread_;
};

// The process's watchdog: the monotonic clock at the kernel tick's resolution (CLOCK_MONOTONIC_COARSE:
// a few ns to read where a VM's steady_clock takes 60); on expiry it writes "error: " and the message to
// stderr, flushes stdout (for at most a second: a stuck thread may hold its lock) and ends the
// process with exit 1. Never destroyed: its thread may outlive main.
CommWatchdog& comm_watchdog();

}  // namespace pretrain
