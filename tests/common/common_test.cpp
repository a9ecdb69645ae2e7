#include <gtest/gtest.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <memory>
#include <thread>

#include <tbb/parallel_pipeline.h>

#include "common/common.h"
#include "test_util.h"

namespace pretrain::common_test {
namespace {

using testing::TempDir;

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

TEST(AtomicFile, InvisibleUntilCommit) {
  TempDir dir;
  std::string path = dir.file("out.bin");
  {
    AtomicFile f(path);
    f.write("hello");
    EXPECT_FALSE(file_exists(path));
    EXPECT_TRUE(file_exists(f.tmp_path()));
    f.commit();
  }
  EXPECT_EQ(read_file(path), "hello");
}

TEST(AtomicFile, RemovedWhenNotCommitted) {
  TempDir dir;
  std::string path = dir.file("out.bin"), tmp;
  {
    AtomicFile f(path);
    tmp = f.tmp_path();
    std::string big(3 << 20, 'x');  // larger than the buffer: really written
    f.write(big);
  }
  EXPECT_FALSE(file_exists(path));
  EXPECT_FALSE(file_exists(tmp));
}

// A resumable file keeps what was flushed when its writer goes away (as a killed run's would),
// continues from the length it is given, and refuses a length it does not hold.
TEST(AtomicFile, ResumableKeepsFlushedBytesAndContinuesFromAGivenLength) {
  TempDir dir;
  std::string path = dir.file("tokens.bin");
  {
    AtomicFile f = AtomicFile::resumable(path, 0);
    EXPECT_EQ(f.tmp_path(), path + ".partial");
    f.write("checkpointed");
    f.flush();
    f.write("lost");  // never flushed: a kill would lose it
  }
  EXPECT_EQ(read_file(path + ".partial"), "checkpointed");
  EXPECT_FALSE(file_exists(path));
  EXPECT_THROW(AtomicFile::resumable(path, 13), Error);
  {
    AtomicFile f = AtomicFile::resumable(path, 5);  // the last checkpoint said 5 bytes
    EXPECT_EQ(f.bytes_written(), 5u);
    f.write(" and the rest");
    f.commit();
  }
  EXPECT_EQ(read_file(path), "check and the rest");
  EXPECT_FALSE(file_exists(path + ".partial"));
}

TEST(AtomicFile, LargeAndSmallWritesKeepOrder) {
  TempDir dir;
  std::string path = dir.file("o");
  std::string expected;
  {
    AtomicFile f(path);
    for (int i = 0; i < 50; ++i) {
      std::string chunk(static_cast<size_t>((i * 7919) % (1 << 21)), static_cast<char>('a' + i % 26));
      f.write(chunk);
      expected += chunk;
    }
    EXPECT_EQ(f.bytes_written(), expected.size());
    f.commit();
  }
  EXPECT_EQ(read_file(path), expected);
}

// `-o /dev/null` or a named pipe: the output is written into it, never renamed onto it (as root,
// a rename onto /dev/null replaced the device with a plain file for the whole machine).
TEST(AtomicFile, DevicesAndPipesAreWrittenInPlace) {
  TempDir dir;
  const std::string fifo = dir.file("pipe");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  // Our own end of the pipe, opened read-write so that neither side blocks (Linux allows it).
  const int end = ::open(fifo.c_str(), O_RDWR | O_NONBLOCK);
  ASSERT_GE(end, 0);
  {
    AtomicFile f(fifo);
    EXPECT_EQ(f.tmp_path(), fifo);
    f.write("through the pipe");
    f.commit();
  }
  char buf[64];
  const ssize_t got = ::read(end, buf, sizeof buf);
  ::close(end);
  EXPECT_EQ(std::string(buf, got > 0 ? static_cast<size_t>(got) : 0), "through the pipe");
  struct stat st {};
  ASSERT_EQ(::stat(fifo.c_str(), &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode)) << "the pipe was replaced";
  EXPECT_FALSE(file_exists(cat(fifo, ".tmp-", ::getpid())));
}

TEST(MappedFile, MapsContentAndEmptyFiles) {
  TempDir dir;
  write_file_atomic(dir.file("a"), "abc");
  write_file_atomic(dir.file("empty"), "");
  MappedFile a(dir.file("a")), e(dir.file("empty"));
  ASSERT_EQ(a.size(), 3u);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(a.data()), 3), "abc");
  EXPECT_EQ(e.size(), 0u);
  EXPECT_THROW(MappedFile(dir.file("missing")), Error);
}

TEST(Hash, Xxh3MatchesKnownValuesAndStreams) {
  // XXH3_64bits("") with seed 0 is the published 0x2D06800538D394C2.
  EXPECT_EQ(xxh3_bytes("", 0), 0x2D06800538D394C2ull);
  std::string s(10000, 'q');
  Xxh3Stream st;
  st.update(s.data(), 1234);
  st.update(s.data() + 1234, s.size() - 1234);
  EXPECT_EQ(st.digest(), xxh3_bytes(s.data(), s.size()));
  EXPECT_EQ(parse_hex64(hex64(0x0123456789abcdefull)), 0x0123456789abcdefull);
  EXPECT_THROW(parse_hex64("xyz"), Error);
  TempDir dir;
  write_file_atomic(dir.file("f"), s);
  EXPECT_EQ(xxh3_file(dir.file("f")), xxh3_bytes(s.data(), s.size()));
}

// A file larger than xxh3_file's 64 MiB pieces: the same hash as one pass over the bytes, and its
// pages do not stay mapped (hashing a multi-GB shard used to add its size to the peak RSS).
TEST(Hash, Xxh3FileStreamsLargeFilesWithoutKeepingThemMapped) {
  TempDir dir;
  std::string big(size_t{150} << 20, '\0');
  for (size_t i = 0; i < big.size(); i += 4096) big[i] = char(i / 4096);
  write_file_atomic(dir.file("big"), big);
  auto rss_file = [] {
    std::ifstream in("/proc/self/status");
    for (std::string line; std::getline(in, line);)
      if (line.rfind("RssFile:", 0) == 0) return std::stoull(line.substr(8)) << 10;
    return 0ull;
  };
  const unsigned long long before = rss_file();
  std::atomic<bool> done{false};
  std::atomic<unsigned long long> peak{before};
  std::thread watch([&] {  // the peak while the file is hashed
    while (!done) {
      peak = std::max(peak.load(), rss_file());
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  });
  const uint64_t hash = xxh3_file(dir.file("big"));
  done = true;
  watch.join();
  EXPECT_EQ(hash, xxh3_bytes(big.data(), big.size()));
  EXPECT_LT(peak.load(), before + (uint64_t{100} << 20)) << "mapped " << ((peak.load() - before) >> 20) << " MiB";
}

TEST(Manifest, RoundTripsAndVerifies) {
  TempDir dir;
  write_file_atomic(dir.file("a.bin"), "0123456789");
  write_file_atomic(dir.file("a.idx"), "idx");
  Manifest m;
  m.format = kFormatMegatron;
  m.tokenizer = {"wordpiece", "abcd", 30522, {{"[CLS]", 101}, {"[SEP]", 102}}};
  m.seq_len = 128;
  m.tool = "test";
  m.args = {"--x", "1"};
  m.seed = 12345;
  ShardEntry e = Manifest::describe(dir.path(), "a.bin", 2);
  e.companions["a.idx"] = hex64(xxh3_file(dir.file("a.idx")));
  m.shards.push_back(e);
  m.write(dir.file(kManifestName));

  Manifest r = Manifest::read(dir.file(kManifestName));
  EXPECT_EQ(r.to_json(), m.to_json());
  EXPECT_EQ(r.tokenizer.special_ids.at("[SEP]"), 102);
  EXPECT_EQ(*r.seed, 12345u);
  EXPECT_TRUE(verify_manifest(r, dir.path(), [](const std::string&) { return uint64_t{2}; }).empty());

  auto wrong_count = verify_manifest(r, dir.path(), [](const std::string&) { return uint64_t{3}; });
  ASSERT_EQ(wrong_count.size(), 1u);
  EXPECT_NE(wrong_count[0].message.find("expected 2 records, found 3"), std::string::npos);

  write_file_atomic(dir.file("a.bin"), "0123456780");  // same size, other bytes
  auto bad = verify_manifest(r, dir.path());
  ASSERT_EQ(bad.size(), 1u);
  EXPECT_EQ(bad[0].file, "a.bin");
  EXPECT_NE(bad[0].message.find("xxh3"), std::string::npos);

  std::remove(dir.file("a.idx").c_str());
  auto missing = verify_manifest(r, dir.path());
  ASSERT_FALSE(missing.empty());
}

TEST(Manifest, MalformedInputNamesTheProblem) {
  TempDir dir;
  write_file_atomic(dir.file("m.json"), "{not json");
  EXPECT_THROW(Manifest::read(dir.file("m.json")), Error);
  write_file_atomic(dir.file("m.json"), R"({"format":"megatron","version":1})");
  try {
    Manifest::read(dir.file("m.json"));
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'shards'"), std::string::npos) << e.what();
  }
  write_file_atomic(dir.file("m.json"), R"({"format":"megatron","version":1,"shards":[{"file":"../x","records":1,"bytes":1,"xxh3":"0"}]})");
  EXPECT_THROW(Manifest::read(dir.file("m.json")), Error);
  write_file_atomic(dir.file("m.json"), R"({"format":"megatron","version":99,"shards":[]})");
  EXPECT_THROW(Manifest::read(dir.file("m.json")), Error);
  // Counts must be integers: a float (here past 2^64) was cast, undefined behaviour out of range.
  write_file_atomic(dir.file("m.json"), R"({"format":"megatron","version":1,"shards":[{"file":"x","records":1e30,"bytes":1,"xxh3":"0"}]})");
  try {
    Manifest::read(dir.file("m.json"));
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("m.json: malformed manifest:"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("but is 1e+30"), std::string::npos) << e.what();
  }
}

TEST(Files, ExpandInputsSortsAndFailsOnNoMatch) {
  TempDir dir;
  write_file_atomic(dir.file("b.jsonl"), "");
  write_file_atomic(dir.file("a.jsonl"), "");
  write_file_atomic(dir.file("c.txt"), "");
  auto files = expand_inputs({dir.path() + "/*.jsonl"});
  ASSERT_EQ(files.size(), 2u);
  EXPECT_EQ(base_name(files[0]), "a.jsonl");
  EXPECT_EQ(expand_inputs({dir.path()}, ".txt").size(), 1u);
  EXPECT_THROW(expand_inputs({dir.path() + "/*.none"}), UsageError);
}

// What a second DirLock on `dir` says, "" when it got the lock.
std::string second_lock_error(const std::string& dir) {
  try {
    DirLock again(dir);
    return "";
  } catch (const Error& e) {
    return e.what();
  }
}

TEST(DirLock, ASecondHolderIsRefusedNamingTheDirectoryAndThePid) {
  TempDir dir;
  const std::string out = dir.file("out/sub");  // created when missing
  DirLock lock(out);
  EXPECT_TRUE(file_exists(path_join(out, ".lock")));
  const std::string message = second_lock_error(out);
  EXPECT_NE(message.find(out), std::string::npos) << message;
  EXPECT_NE(message.find(cat("pid ", ::getpid())), std::string::npos) << message;
  // Another process is refused the same way: flock's lock belongs to the holder's open file.
  const pid_t child = ::fork();
  if (child == 0) _exit(second_lock_error(out).find(cat("pid ", ::getppid())) != std::string::npos ? 0 : 1);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

TEST(DirLock, LettingGoRemovesTheFileAndFreesTheDirectory) {
  TempDir dir;
  { DirLock lock(dir.path()); }
  EXPECT_FALSE(file_exists(dir.file(".lock")));  // nothing left beside the outputs
  EXPECT_EQ(second_lock_error(dir.path()), "");
  // A lock file no process holds (its writer was killed) is taken over.
  write_file_atomic(dir.file(".lock"), "999999999\n");
  EXPECT_EQ(second_lock_error(dir.path()), "");
}

TEST(DirLock, AKilledHolderLeavesTheDirectoryFree) {
  TempDir dir;
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  const pid_t child = ::fork();
  if (child == 0) {
    DirLock lock(dir.path());
    char b = 1;
    if (::write(ready[1], &b, 1) != 1) _exit(1);
    ::pause();  // killed here, holding the lock
    _exit(0);
  }
  char b = 0;
  ASSERT_EQ(::read(ready[0], &b, 1), 1);
  EXPECT_NE(second_lock_error(dir.path()).find(cat("pid ", child)), std::string::npos);
  ::kill(child, SIGKILL);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ::close(ready[0]);
  ::close(ready[1]);
  EXPECT_TRUE(file_exists(dir.file(".lock")));  // left by the kill, but the kernel let go of the lock
  EXPECT_EQ(second_lock_error(dir.path()), "");
}

// A killed trainer leaves step-N.tmp-<pid>/, a directory: the next run removes it with its files.
TEST(Files, StaleTempDirectoriesOfADeadProcessAreRemoved) {
  TempDir dir;
  const pid_t dead = ::fork();
  if (dead == 0) _exit(0);
  ASSERT_EQ(::waitpid(dead, nullptr, 0), dead);
  const std::string stale = dir.file(cat("step-00000004.tmp-", dead)), live = dir.file(cat("step-00000006.tmp-", ::getpid()));
  make_dirs(stale);
  make_dirs(live);
  write_file_atomic(path_join(stale, "model.safetensors"), "half");
  const auto removed = remove_stale_temp_files(dir.path(), [](std::string_view n) { return n.starts_with("step-"); });
  ASSERT_EQ(removed.size(), 1u);
  EXPECT_EQ(removed[0], stale);
  EXPECT_FALSE(file_exists(stale));
  EXPECT_TRUE(file_exists(live));  // this process's own stays
}

// The directory's lock says no other writer is there: a temp file named by a pid that runs is still
// a dead writer's (chaos.sh: a killed MPI rank still dying when --resume started, or its pid since
// taken by another process, left step-N.tmp-<pid>/ behind a successful resume).
TEST(Files, StaleTempFilesAreRemovedEvenWhenTheirPidNamesALiveProcess) {
  TempDir dir;
  const pid_t other = ::fork();
  if (other == 0) {
    ::pause();
    _exit(0);
  }
  const std::string stale = dir.file(cat("latest.tmp-", other));
  write_file_atomic(stale, "step-00000002\n");
  const auto removed = remove_stale_temp_files(dir.path(), [](std::string_view n) { return n == "latest"; });
  ::kill(other, SIGKILL);
  ::waitpid(other, nullptr, 0);
  EXPECT_EQ(removed.size(), 1u);
  EXPECT_FALSE(file_exists(stale));
}

TEST(Progress, LineShowsDoneTotalAndRate) {
  Progress::set_enabled(false);
  Progress p("bytes", 1000, Progress::Unit::bytes);
  p.add(250);
  std::string line = p.line();
  EXPECT_NE(line.find("250 B / 1.00 kB"), std::string::npos) << line;
  EXPECT_NE(line.find("25%"), std::string::npos) << line;
}

TEST(Device, CpuAlwaysWorksAndCudaFailsCleanlyWithoutGpu) {
  EXPECT_NO_THROW(require_device("cpu"));
  EXPECT_THROW(require_device("tpu"), UsageError);
  DeviceReport r = query_devices();
  if (r.gpus.empty()) {
    EXPECT_FALSE(r.reason.empty());
    EXPECT_THROW(require_device("cuda"), Error);
  } else {
    EXPECT_NO_THROW(require_device("cuda:0"));
  }
}

// The one device-string parser every stage uses (the loader, the trainer, require_device).
TEST(Device, ParsesCpuCudaAndCudaNAndRefusesTheRest) {
  EXPECT_FALSE(parse_device_spec("cpu").cuda);
  EXPECT_TRUE(parse_device_spec("cuda").cuda);
  EXPECT_EQ(parse_device_spec("cuda").index, 0);
  EXPECT_EQ(parse_device_spec("cuda:3").index, 3);
  for (const char* bad : {"tpu", "cuda3", "cuda:", "cuda:-1", "cuda:1x", "CPU", "", "cuda:99999999"}) {
    try {
      parse_device_spec(bad);
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const UsageError& e) {
      EXPECT_NE(std::string(e.what()).find("expected cpu, cuda or cuda:N"), std::string::npos) << e.what();
    }
  }
}

TEST(ModelKind, NamesRoundTripAndOthersAreRefusedNamingTheOption) {
  for (ModelKind k : {ModelKind::bert, ModelKind::gpt}) EXPECT_EQ(parse_model_kind(model_kind_name(k), "x"), k);
  try {
    parse_model_kind("t5", "--model");
    ADD_FAILURE() << "accepted t5";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("--model"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("\"t5\""), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace pretrain::common_test
