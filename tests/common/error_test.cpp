// common/error.h: errors that say where and what, and FirstError, which keeps the first failure
// of work on many threads so that a pipeline drains instead of leaking.
#include "common/error.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <memory>
#include <thread>

#include <tbb/parallel_pipeline.h>

namespace pretrain::error_test {
namespace {

TEST(Error, NamesFileOffsetAndExpectation) {
  try {
    expect(false, Where::at_offset("x.idx", 17), "magic MMIDIDX", "'ABC'");
    FAIL() << "expect(false) did not throw";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "x.idx: byte 17: expected magic MMIDIDX, found 'ABC'");
    EXPECT_EQ(e.where().offset, 17);
  }
  EXPECT_EQ(Where::at_record("a.h5", 3).str(), "a.h5: record 3");
  EXPECT_EQ(Where::at_line("v.txt", 12).str(), "v.txt:12");
}

// Items that count themselves, to see that none is left behind by a failed pipeline.
struct CountedItem {
  static inline std::atomic<int> alive{0};
  int index;
  explicit CountedItem(int i) : index(i) { ++alive; }
  ~CountedItem() { --alive; }
};

TEST(FirstError, APipelineWhoseStageFailsDrainsDestroysEveryItemAndRethrowsTheFirstError) {
  for (int fail_at : {0, 3, 40}) {
    FirstError error;
    std::atomic<int> stored{0};
    int next = 0;
    tbb::parallel_pipeline(
        8,
        tbb::make_filter<void, std::shared_ptr<CountedItem>>(tbb::filter_mode::serial_in_order,
                                                              [&](tbb::flow_control& fc) {
                                                                if (error.failed() || next == 100) fc.stop();
                                                                return std::make_shared<CountedItem>(next++);
                                                              }) &
            tbb::make_filter<std::shared_ptr<CountedItem>, std::shared_ptr<CountedItem>>(
                tbb::filter_mode::parallel,
                [&](std::shared_ptr<CountedItem> item) {
                  error.keep([&] { std::this_thread::sleep_for(std::chrono::microseconds(50 * (item->index % 7))); });
                  return item;
                }) &
            tbb::make_filter<std::shared_ptr<CountedItem>, void>(tbb::filter_mode::serial_in_order,
                                                                  [&](std::shared_ptr<CountedItem> item) {
                                                                    if (error.failed()) return;
                                                                    error.keep([&] {
                                                                      if (item->index >= fail_at)
                                                                        throw Error(cat("item ", item->index));
                                                                      ++stored;
                                                                    });
                                                                  }));
    EXPECT_EQ(CountedItem::alive.load(), 0) << "items left behind, failing at " << fail_at;
    EXPECT_EQ(stored.load(), fail_at) << "no item after the failing one is stored";
    ASSERT_TRUE(error.failed());
    try {
      error.rethrow();
      ADD_FAILURE() << "no exception rethrown";
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()), cat("item ", fail_at)) << "the first error, not a later one";
    }
  }
  FirstError none;
  EXPECT_TRUE(none.keep([] {}));
  EXPECT_FALSE(none.failed());
  EXPECT_NO_THROW(none.rethrow());
}

TEST(Error, WhereNamesWhatIsSetAndTheInputWhenNoFile) {
  EXPECT_EQ(Where{}.str(), "<input>");
  EXPECT_EQ(Where{"a.txt"}.str(), "a.txt");
  EXPECT_EQ((Where{"a.txt", 9, -1, 3}).str(), "a.txt:3: byte 9");
  EXPECT_EQ(Error(Where::at_record("s.h5", 0), "bad").what(), std::string("s.h5: record 0: bad"));
  EXPECT_EQ(Error("plain").what(), std::string("plain"));  // no where: the message alone
  EXPECT_EQ(Error("plain").where().file, "");
}

TEST(Error, UsageErrorIsAnErrorAndCatConcatenatesAnything) {
  EXPECT_THROW(throw UsageError("x"), Error);
  EXPECT_EQ(cat("record ", 7, " of ", 2.5, ' ', std::string("f")), "record 7 of 2.5 f");
  EXPECT_NO_THROW(expect(true, Where{"f"}, "anything", "nothing"));
}

TEST(Error, ThrowErrnoNamesTheOperationThePathAndTheSystemsWords) {
  errno = ENOENT;
  try {
    throw_errno("cannot open", "/no/such");
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "/no/such: cannot open: No such file or directory");
    EXPECT_EQ(e.where().file, "/no/such");
    return;
  }
  ADD_FAILURE() << "throw_errno returned";
}

}  // namespace
}  // namespace pretrain::error_test
