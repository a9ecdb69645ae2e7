// common/log.h: stamped lines on stderr filtered by level, and figures for humans.
#include "common/log.h"

#include <gtest/gtest.h>

#include <cmath>
#include <regex>
#include <string>

namespace pretrain::log_test {
namespace {

// What the log calls wrote to stderr at `level`.
template <typename F>
std::string logged_at(LogLevel level, F&& f) {
  const LogLevel before = log_level();
  set_log_level(level);
  ::testing::internal::CaptureStderr();
  f();
  std::string out = ::testing::internal::GetCapturedStderr();
  set_log_level(before);
  return out;
}

TEST(Log, LinesAreStampedAndNamedByLevel) {
  const std::string out = logged_at(LogLevel::info, [] { log_warn("shard ", 3, " is short"); });
  EXPECT_TRUE(std::regex_match(out, std::regex(R"(\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\] warn: shard 3 is short\n)"))) << out;
}

TEST(Log, LevelsBelowTheSetOneAreDroppedErrorsNever) {
  auto all = [] {
    log_info("i");
    log_warn("w");
    log_error("e");
  };
  auto names = [](const std::string& out) {
    std::string s;
    for (const char* l : {"] info: i\n", "] warn: w\n", "] error: e\n"})
      if (out.find(l) != std::string::npos) s += l[2];
    return s;
  };
  EXPECT_EQ(names(logged_at(LogLevel::debug, all)), "iwe");
  EXPECT_EQ(names(logged_at(LogLevel::info, all)), "iwe");
  EXPECT_EQ(names(logged_at(LogLevel::warn, all)), "we");
  EXPECT_EQ(names(logged_at(LogLevel::error, all)), "e");
  const LogLevel before = log_level();
  set_log_level(LogLevel::error);
  EXPECT_EQ(log_level(), LogLevel::error);
  set_log_level(before);
}

TEST(Log, HumanBytesStepByThousands) {
  EXPECT_EQ(human_bytes(0), "0 B");
  EXPECT_EQ(human_bytes(999), "999 B");
  EXPECT_EQ(human_bytes(1000), "1.00 kB");
  EXPECT_EQ(human_bytes(1.5e9), "1.50 GB");
  EXPECT_EQ(human_bytes(2.5e15), "2500.00 TB");  // TB is the largest unit
}

TEST(Log, HumanCountHasNoSpaceBeforeItsUnit) {
  EXPECT_EQ(human_count(999), "999");
  EXPECT_EQ(human_count(12500), "12.50k");
  EXPECT_EQ(human_count(3e6), "3.00M");
  EXPECT_EQ(human_count(4e12), "4000.00G");
}

TEST(Log, HumanDurationInSecondsMinutesOrHours) {
  EXPECT_EQ(human_duration(0), "0.0s");
  EXPECT_EQ(human_duration(5.3), "5.3s");
  EXPECT_EQ(human_duration(61), "1m01s");
  EXPECT_EQ(human_duration(3725), "1h02m05s");
  EXPECT_EQ(human_duration(-1), "?");
  EXPECT_EQ(human_duration(std::nan("")), "?");
  EXPECT_EQ(human_duration(1e9), "?");  // an ETA at a rate near zero
}

}  // namespace
}  // namespace pretrain::log_test
