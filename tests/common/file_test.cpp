// common/file.h: atomic outputs, read-only maps, directory locks, stale temp files, input lists.
#include "common/file.h"

#include <gtest/gtest.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/error.h"
#include "test_util.h"

namespace pretrain::file_test {
namespace {

using testing::TempDir;

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

TEST(Files, PathJoinBaseNameAndDirName) {
  EXPECT_EQ(path_join("a", "b.txt"), "a/b.txt");
  EXPECT_EQ(path_join("a/", "b.txt"), "a/b.txt");
  EXPECT_EQ(path_join("", "b.txt"), "b.txt");
  EXPECT_EQ(path_join("a", "/abs/b.txt"), "/abs/b.txt");  // an absolute name stays as it is
  EXPECT_EQ(base_name("/x/y/manifest.json"), "manifest.json");
  EXPECT_EQ(dir_name("/x/y/manifest.json"), "/x/y");
  EXPECT_EQ(dir_name("manifest.json"), "");
}

TEST(Files, SizeReadWriteAndMissingFilesNamed) {
  TempDir dir;
  make_dirs(dir.file("a/b/c"));
  make_dirs(dir.file("a/b/c"));  // again: nothing to do
  const std::string path = dir.file("a/b/c/f.bin");
  EXPECT_FALSE(file_exists(path));
  write_file_atomic(path, std::string("x\0y", 3));
  EXPECT_TRUE(file_exists(path));
  EXPECT_EQ(file_size(path), 3u);
  EXPECT_EQ(read_file(path), std::string("x\0y", 3));
  const std::string message = testing::error_message([&] { file_size(dir.file("missing")); });
  EXPECT_NE(message.find(dir.file("missing")), std::string::npos) << message;
  EXPECT_THROW(read_file(dir.file("missing")), Error);
}

}  // namespace
}  // namespace pretrain::file_test
