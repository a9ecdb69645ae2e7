// common/cli.h: what every tool shares — --version, --threads, --quiet, and exit codes 0 (done),
// 1 (a data or runtime error) and 2 (bad usage) with "error: …" on stderr.
#include "common/cli.h"

#include <gtest/gtest.h>

#include <regex>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/error.h"
#include "common/log.h"
#include "common/progress.h"

namespace pretrain::cli_test {
namespace {

// run_tool on a tool with one --n option and the common ones; what it returned and printed.
struct ToolRun {
  int code;
  std::string out, err;
  int n;
};
ToolRun run(std::vector<std::string> args, const std::function<int()>& body = [] { return 0; }) {
  CLI::App app{"a test tool", "test-tool"};
  ToolOptions common(app);
  int n = 0;
  app.add_option("--n", n, "a number")->check(CLI::Range(0, 9));
  args.insert(args.begin(), "test-tool");
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  ::testing::internal::CaptureStdout();
  ::testing::internal::CaptureStderr();
  const int code = run_tool(app, int(argv.size()), argv.data(), body);
  std::string err = ::testing::internal::GetCapturedStderr();
  return {code, ::testing::internal::GetCapturedStdout(), std::move(err), n};
}

TEST(Cli, VersionIsThreeNumbersAndTheFlagPrintsIt) {
  EXPECT_TRUE(std::regex_match(version_string(), std::regex(R"(\d+\.\d+\.\d+)"))) << version_string();
  const ToolRun r = run({"--version"}, [] { return 7; });
  EXPECT_EQ(r.code, 0);  // printed, and the body never ran
  EXPECT_EQ(r.out, cat("test-tool (pretrain suite) ", version_string(), "\n"));
}

TEST(Cli, UsageErrorsExitTwoAndNameTheOption) {
  ToolRun r = run({"--n", "12"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--n"), std::string::npos) << r.err;
  r = run({"--no-such-flag"});
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--no-such-flag"), std::string::npos) << r.err;
  r = run({"--threads", "-1"});
  EXPECT_EQ(r.code, 2) << "a negative --threads";
  r = run({}, []() -> int { throw UsageError("--n and --m together"); });
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err, "error: --n and --m together\n");
}

TEST(Cli, TheBodysCodeOrOneForAnError) {
  ToolRun r = run({"--n", "3"}, [] { return 5; });
  EXPECT_EQ(r.code, 5);
  EXPECT_EQ(r.err, "");
  r = run({}, []() -> int { throw Error(Where::at_line("v.txt", 4), "expected a token"); });
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.err, "error: v.txt:4: expected a token\n");
  r = run({}, []() -> int { throw std::runtime_error("out of memory"); });
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.err, "error: out of memory\n");
}

TEST(Cli, HelpExitsZeroListingTheCommonOptions) {
  const ToolRun r = run({"--help"}, [] { return 3; });
  EXPECT_EQ(r.code, 0);
  for (const char* flag : {"--threads", "--quiet", "--version", "--n"}) EXPECT_NE(r.out.find(flag), std::string::npos) << r.out;
}

// --threads caps the workers of the whole process; --quiet leaves warnings only.
TEST(Cli, ThreadsAndQuietApplyBeforeTheBody) {
  int seen_threads = 0;
  LogLevel seen_level = LogLevel::debug;
  const LogLevel before = log_level();
  const ToolRun r = run({"--threads", "2", "-q", "--n", "4"}, [&] {
    seen_threads = max_threads();
    seen_level = log_level();
    return 0;
  });
  set_log_level(before);
  Progress::set_enabled(false);
  EXPECT_EQ(r.code, 0);
  EXPECT_EQ(r.n, 4);
  EXPECT_EQ(seen_threads, 2);
  EXPECT_EQ(seen_level, LogLevel::warn);
}

TEST(Cli, RunReportingErrorsMapsExceptionsWithoutParsing) {
  ::testing::internal::CaptureStderr();
  const int ok = run_reporting_errors([] { return 0; });
  const int usage = run_reporting_errors([]() -> int { throw UsageError("bad flag"); });
  const int data = run_reporting_errors([]() -> int { throw Error("bad file"); });
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(ok, 0);
  EXPECT_EQ(usage, 2);
  EXPECT_EQ(data, 1);
  EXPECT_EQ(err, "error: bad flag\nerror: bad file\n");
}

}  // namespace
}  // namespace pretrain::cli_test
