// InputFile, the one opener of user-named input paths: a directory, a FIFO (without blocking), a
// device and a file over the caller's bound are refused with an error naming the path and the
// problem; a regular file is read whole; MappedFile (GGUF) goes through the same checks.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>

#include "gguf/gguf_file.h"
#include "util/input_file.h"
#include "util/mapped_file.h"

namespace agentkv {
namespace {

std::string temp_path(const std::string& name) {
  return ::testing::TempDir() + "agentkv_input_" + std::to_string(::getpid()) + "_" + name;
}

void expect_refused(const Status& st, const std::string& path, const std::string& why) {
  ASSERT_FALSE(st.ok()) << path;
  EXPECT_NE(st.error().find(path), std::string::npos) << st.error();
  EXPECT_NE(st.error().find(why), std::string::npos) << st.error();
}

template <class T>
Status status_of(const Result<T>& r) {
  return r.ok() ? Status() : Status(r.status_error());
}

TEST(InputFile, ReadsARegularFileWhole) {
  const std::string p = temp_path("ok.txt");
  std::ofstream(p) << "hello\nworld\n";
  auto r = read_input_file(p, 100, "--corpus");
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_EQ(*r, "hello\nworld\n");
  auto exact = read_input_file(p, 12, "--corpus");  // exactly at the bound
  ASSERT_TRUE(exact.ok()) << exact.error();
  std::remove(p.c_str());
}

TEST(InputFile, RefusesAFileOverTheBound) {
  const std::string p = temp_path("big.txt");
  std::ofstream(p) << std::string(1000, 'x');
  auto r = read_input_file(p, 999, "--corpus");
  expect_refused(status_of(r), p, "over the 999-byte limit");
  EXPECT_EQ(r.code(), ErrorCode::kTooLarge);
  EXPECT_NE(r.error().find("--corpus"), std::string::npos) << r.error();
  std::remove(p.c_str());
}

TEST(InputFile, RefusesADirectory) {
  const std::string d = temp_path("dir");
  ASSERT_EQ(::mkdir(d.c_str(), 0700), 0);
  expect_refused(status_of(read_input_file(d, 1 << 20, "--sender-cache")), d, "a directory, not a regular file");
  expect_refused(status_of(MappedFile::open(d, 1 << 20)), d, "a directory");
  ::rmdir(d.c_str());
}

// A FIFO with no writer: open(2) without O_NONBLOCK would wait forever. It must return at once.
TEST(InputFile, RefusesAFifoWithoutBlocking) {
  const std::string f = temp_path("fifo");
  ASSERT_EQ(::mkfifo(f.c_str(), 0600), 0);
  const auto t0 = std::chrono::steady_clock::now();
  expect_refused(status_of(read_input_file(f, 1 << 20, "--map")), f, "a FIFO, not a regular file");
  expect_refused(status_of(GgufFile::open(f)), f, "a FIFO");
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
  ::unlink(f.c_str());
}

TEST(InputFile, RefusesDevicesSoNothingReadsWithoutBound) {
  expect_refused(status_of(read_input_file("/dev/zero", 1 << 20, "--jsonl")), "/dev/zero", "a character device");
  expect_refused(status_of(MappedFile::open("/dev/zero", 1 << 20)), "/dev/zero", "a character device");
}

TEST(InputFile, MissingAndEmptyPaths) {
  auto r = read_input_file(temp_path("missing"), 10, "--steps");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.code(), ErrorCode::kNotFound);
  EXPECT_NE(r.error().find("No such file"), std::string::npos) << r.error();
  auto e = read_input_file("", 10, "--steps");
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.error().find("--steps"), std::string::npos) << e.error();
}

// /proc files say size 0 but have content: the read goes to end of file, still under the bound.
TEST(InputFile, ReadsFilesWhoseSizeIsNotKnownUpFront) {
  auto r = read_input_file("/proc/self/status", 1 << 20, "status");
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_NE(r->find("Name:"), std::string::npos);
  auto small = read_input_file("/proc/self/status", 16, "status");
  ASSERT_FALSE(small.ok());
  EXPECT_EQ(small.code(), ErrorCode::kTooLarge);
}

}  // namespace
}  // namespace agentkv
