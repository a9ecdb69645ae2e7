// common/progress.h: the status line of long work, and its reports.
#include "common/progress.h"

#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

#include "common/log.h"

namespace pretrain::progress_test {
namespace {

TEST(Progress, LineShowsDoneTotalAndRate) {
  Progress::set_enabled(false);
  Progress p("bytes", 1000, Progress::Unit::bytes);
  p.add(250);
  std::string line = p.line();
  EXPECT_NE(line.find("250 B / 1.00 kB"), std::string::npos) << line;
  EXPECT_NE(line.find("25%"), std::string::npos) << line;
}

TEST(Progress, UnknownTotalHasNoPercentageNorEta) {
  Progress::set_enabled(false);
  Progress p("docs", 0);
  p.add(1500);
  const std::string line = p.line();
  EXPECT_EQ(line.rfind("docs  1.50k", 0), 0u) << line;  // items in human_count's units
  EXPECT_EQ(line.find('%'), std::string::npos) << line;
  EXPECT_EQ(line.find("ETA"), std::string::npos) << line;
  EXPECT_NE(line.find("/s"), std::string::npos) << line;
}

TEST(Progress, SetReplacesAddAccumulatesAndTheNoteComesLast) {
  Progress::set_enabled(false);
  Progress p("pages", 200);
  p.add(30);
  p.set(100);
  p.add(20);
  EXPECT_EQ(p.done(), 120u);
  p.set_note("12 files");
  const std::string line = p.line();
  EXPECT_NE(line.find("120 / 200  60%"), std::string::npos) << line;
  EXPECT_NE(line.find("ETA"), std::string::npos) << line;  // some left, at a known rate
  EXPECT_EQ(line.size() - line.rfind("  12 files"), std::string("  12 files").size()) << line;
}

TEST(Progress, ConcurrentAddsAreAllCounted) {
  Progress::set_enabled(false);
  Progress p("items", 0);
  std::vector<std::thread> workers;
  for (int t = 0; t < 8; ++t)
    workers.emplace_back([&] {
      for (int i = 0; i < 10000; ++i) p.add(1);
    });
  for (std::thread& w : workers) w.join();
  EXPECT_EQ(p.done(), 80000u);
}

// Off a terminal (a log file, a pipe: here the captured stderr), the final figures are one info
// line, however often finish() is called; disabled, nothing at all.
TEST(Progress, FinishReportsOnceAndNotWhenDisabled) {
  const LogLevel level = log_level();
  set_log_level(LogLevel::info);
  Progress::set_enabled(true);
  ::testing::internal::CaptureStderr();
  {
    Progress p("shards", 4, Progress::Unit::items, 3600);
    p.add(4);
    p.finish();
    p.finish();
  }  // and the destructor
  const std::string reported = ::testing::internal::GetCapturedStderr();
  Progress::set_enabled(false);
  ::testing::internal::CaptureStderr();
  {
    Progress quiet("shards", 4, Progress::Unit::items, 0);
    quiet.add(4);
  }
  const std::string silent = ::testing::internal::GetCapturedStderr();
  set_log_level(level);
  size_t lines = 0;
  for (char c : reported) lines += c == '\n';
  EXPECT_EQ(lines, 1u) << reported;
  EXPECT_NE(reported.find("info: shards  4 / 4  100%"), std::string::npos) << reported;
  EXPECT_EQ(silent, "");
}

}  // namespace
}  // namespace pretrain::progress_test
