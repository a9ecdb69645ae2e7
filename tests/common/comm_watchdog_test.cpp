// common/comm_watchdog.h: the watchdog for stalled communication. Most tests drive it with a clock
// of their own and call check() themselves; one runs its thread on the real clock, and one the
// process's watchdog, which ends the process.
#include "common/comm_watchdog.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace pretrain::comm_watchdog_test {
namespace {

constexpr int64_t kSecond = 1'000'000'000;
const char* const kData = "the data group (world ranks 0, 1)";
const char* const kTensor = "the tensor group (world ranks 0-3)";

// A watchdog on a clock the test moves, that records what it says instead of ending the process.
struct Fixture {
  std::atomic<int64_t> now{1000 * kSecond};
  std::vector<std::string> said;
  CommWatchdog watchdog{[this] { return now.load(); }, [this](const std::string& m) { said.push_back(m); }, false};
  explicit Fixture(double timeout = 5) {
    watchdog.attach(1, {"host-a", "host-b"});
    watchdog.set_timeout(timeout);
  }
  void wait(double seconds) { now += int64_t(seconds * double(kSecond)); }
};

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

TEST(CommWatchdog, ExpiresOnceNamingRankHostOperationGroupAndStep) {
  Fixture f;
  f.watchdog.set_step(12);
  f.watchdog.set_stage("train");
  const CommWatchdog::Call call(f.watchdog, "all-reduce", kData);
  f.wait(4.9);
  EXPECT_FALSE(f.watchdog.check());
  f.wait(0.1);
  EXPECT_TRUE(f.watchdog.check());
  ASSERT_EQ(f.said.size(), 1u);
  const std::string& m = f.said[0];
  EXPECT_TRUE(has(m, "rank 1 of 2 (host host-b): all-reduce over the data group (world ranks 0, 1) has waited 5.0 s "
                     "at step 12 (train), past --comm-timeout 5"))
      << m;
  f.wait(100);
  EXPECT_FALSE(f.watchdog.check());  // once
  EXPECT_EQ(f.said.size(), 1u);
}

TEST(CommWatchdog, ACallThatEndsInTimeNeverExpires) {
  Fixture f;
  for (int i = 0; i < 3; ++i) {
    const CommWatchdog::Call call(f.watchdog, "barrier", kData);
    f.wait(4.5);
    EXPECT_FALSE(f.watchdog.check());
  }
  f.wait(1000);  // nothing in flight, however long
  EXPECT_FALSE(f.watchdog.check());
  EXPECT_TRUE(f.said.empty());
}

TEST(CommWatchdog, OffWatchesNothing) {
  Fixture f(0);
  const CommWatchdog::Call call(f.watchdog, "barrier", kData);
  f.wait(1e6);
  EXPECT_FALSE(f.watchdog.check());
  // Turned on later, a call made while it was off stays unwatched; the next is watched.
  f.watchdog.set_timeout(5);
  f.wait(10);
  EXPECT_FALSE(f.watchdog.check());
  const CommWatchdog::Call later(f.watchdog, "broadcast", kData);
  f.wait(5);
  EXPECT_TRUE(f.watchdog.check());
  ASSERT_EQ(f.said.size(), 1u);
  EXPECT_TRUE(has(f.said[0], "broadcast over")) << f.said[0];
}

TEST(CommWatchdog, PointToPointNamesThePeerAndItsHost) {
  Fixture f(2);
  f.watchdog.set_step(7);
  const CommWatchdog::Call call(f.watchdog, "receive from", "the pipeline group (world ranks 0, 1)", 0);
  f.wait(2.5);
  EXPECT_TRUE(f.watchdog.check());
  ASSERT_EQ(f.said.size(), 1u);
  EXPECT_TRUE(has(f.said[0], "receive from world rank 0 (host host-a) over the pipeline group (world ranks 0, 1) "
                             "has waited 2.5 s at step 7,"))
      << f.said[0];
}

TEST(CommWatchdog, AStageWithoutAStep) {
  Fixture f;
  f.watchdog.set_stage("tokenize");
  const CommWatchdog::Call call(f.watchdog, "all-gather", "the world (ranks 0-1)");
  f.wait(6);
  ASSERT_TRUE(f.watchdog.check());
  EXPECT_TRUE(has(f.said[0], "all-gather over the world (ranks 0-1) has waited 6.0 s in stage tokenize,"))
      << f.said[0];
}

TEST(CommWatchdog, NestedCallsExpireOnTheOldest) {
  Fixture f;
  const CommWatchdog::Call outer(f.watchdog, "all-gather of strings", kData);
  f.wait(3);
  {
    const CommWatchdog::Call inner(f.watchdog, "all-gather", kData);
    f.wait(1);
    EXPECT_FALSE(f.watchdog.check());
  }
  f.wait(1);  // outer: 5 s
  EXPECT_TRUE(f.watchdog.check());
  ASSERT_EQ(f.said.size(), 1u);
  EXPECT_TRUE(has(f.said[0], "all-gather of strings over")) << f.said[0];
}

// Calls from several threads at once (the trainer's and the gradient reducer's), each short:
// however they interleave with checks, nothing expires, and every slot is free afterwards (a long
// call made then is watched).
TEST(CommWatchdog, ConcurrentCallsFromSeveralThreads) {
  Fixture f;
  // The threads call until the checker has looked 1000 times while they ran (on a loaded machine
  // a fixed count of calls could end before the checker's first look).
  std::atomic<int> running{4}, checks{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&] {
      for (int i = 0; i < 20000 || checks.load() < 1000; ++i) {
        const CommWatchdog::Call a(f.watchdog, "all-reduce", kData);
        const CommWatchdog::Call b(f.watchdog, "send to", kData, 0);
      }
      --running;
    });
  for (; running > 0; ++checks) EXPECT_FALSE(f.watchdog.check());
  for (std::thread& t : threads) t.join();
  EXPECT_GE(checks.load(), 1000);
  f.wait(1e4);
  EXPECT_FALSE(f.watchdog.check());
  std::vector<std::unique_ptr<CommWatchdog::Call>> many;
  many.push_back(std::make_unique<CommWatchdog::Call>(f.watchdog, "first", kData));
  f.wait(1);
  for (int i = 0; i < 19; ++i)  // more than the slots: the ones past them go unwatched, harmlessly
    many.push_back(std::make_unique<CommWatchdog::Call>(f.watchdog, "later", kData));
  f.wait(4);
  EXPECT_TRUE(f.watchdog.check());
  ASSERT_EQ(f.said.size(), 1u);
  EXPECT_TRUE(has(f.said[0], "first over")) << f.said[0];
}

struct FakeProbe : CommWatchdog::DeviceProbe {
  std::optional<CommWatchdog::Pending> pending;
  std::optional<CommWatchdog::Pending> oldest_pending() override { return pending; }
};

TEST(CommWatchdog, DeviceWorkThatNeverCompletesExpires) {
  Fixture f;
  FakeProbe probe;
  f.watchdog.add_probe(&probe);
  probe.pending = CommWatchdog::Pending{f.now.load(), "NCCL all-reduce on cuda:0", kTensor};
  f.wait(4);
  EXPECT_FALSE(f.watchdog.check());
  probe.pending.reset();  // it completed
  f.wait(10);
  EXPECT_FALSE(f.watchdog.check());
  probe.pending = CommWatchdog::Pending{f.now.load(), "NCCL all-reduce on cuda:0", kTensor};
  f.wait(5);
  EXPECT_TRUE(f.watchdog.check());
  ASSERT_EQ(f.said.size(), 1u);
  EXPECT_TRUE(has(f.said[0], "NCCL all-reduce on cuda:0 over the tensor group (world ranks 0-3) has waited 5.0 s"))
      << f.said[0];
  f.watchdog.remove_probe(&probe);
}

// The thread on the real clock: a short timeout expires within a few of its polls; short calls do not.
TEST(CommWatchdog, ItsThreadExpiresAStalledCallAndOnlyThat) {
  std::atomic<int> expired{0};
  std::string said;
  CommWatchdog w([] { return std::chrono::steady_clock::now().time_since_epoch().count(); },
                 [&](const std::string& m) { said = m, ++expired; });
  w.set_timeout(0.2);
  w.attach(0, {"here"});
  for (int i = 0; i < 20; ++i) {
    const CommWatchdog::Call call(w, "barrier", kData);
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(expired.load(), 0);
  const auto start = std::chrono::steady_clock::now();
  const CommWatchdog::Call stalled(w, "receive from", kData, 0);
  while (expired.load() == 0 && std::chrono::steady_clock::now() - start < std::chrono::seconds(5))
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_EQ(expired.load(), 1);
  EXPECT_GE(waited, 0.2);
  EXPECT_LT(waited, 1.0);
  EXPECT_TRUE(has(said, "rank 0 of 1 (host here): receive from world rank 0 (host here)")) << said;
}

// The process's own watchdog ends the process: exit 1, the message on stderr.
TEST(CommWatchdogDeathTest, TheProcessWatchdogEndsTheProcess) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        comm_watchdog().attach(0, {"here"});
        comm_watchdog().set_timeout(0.1);
        const CommWatchdog::Call call(comm_watchdog(), "barrier", "the world (rank 0)");
        std::this_thread::sleep_for(std::chrono::seconds(10));
      },
      ::testing::ExitedWithCode(1),
      "error: rank 0 of 1 \\(host here\\): barrier over the world \\(rank 0\\) has waited");
}

TEST(CommWatchdog, TheOptionTakesSecondsAndRefusesNegativeOnes) {
  double seconds = kCommTimeoutTrainer;
  CLI::App app;
  add_comm_timeout_option(app, seconds);
  EXPECT_TRUE(has(app.help(), "--comm-timeout")) << app.help();
  EXPECT_TRUE(has(app.help(), "300")) << app.help();
  app.parse("--comm-timeout 2.5", false);
  EXPECT_EQ(seconds, 2.5);
  EXPECT_THROW(app.parse("--comm-timeout -1", false), CLI::ValidationError);
}

}  // namespace
}  // namespace pretrain::comm_watchdog_test
