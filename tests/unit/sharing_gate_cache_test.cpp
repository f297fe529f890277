// The sharing gate's cached measurement (engine/sharing_gate.h): reused while intact; an edited
// value, a removed checksum, a copy under another model's name or damaged bytes are measured again,
// never trusted. No model: the measurement is a stand-in function and the model only a fingerprint.
#include "engine/sharing_gate.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "model/loaded_model.h"
#include "util/thread_pool.h"

namespace agentkv {
namespace {

std::string read_all(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

void write_all(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

class SharingGateCache : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = (std::filesystem::temp_directory_path() / ("agentkv-gate-cache-" + std::to_string(::getpid()))).string();
    std::filesystem::remove_all(dir_);
    lm_.fingerprint = 0x1234;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  Result<SharingGateResult> run(DiffFormat format = DiffFormat::kF16) {
    return run_gate_cached(lm_, pool_, 0.15, SharingGateThresholds{0.05, 0.5}, dir_, "test-", 1,
                           [this](const LoadedModel&, ThreadPool&, double, DiffFormat f) -> Result<GateMeasurement> {
                             ++measured_;
                             EXPECT_EQ(f, measured_format_);
                             GateMeasurement m;
                             m.agents = 2;
                             m.kls = {0.01, 0.03};
                             m.top1 = 9;
                             m.positions = 10;
                             m.greedy = 1.5;
                             return m;
                           },
                           format);
  }
  std::string cache_file() const {
    for (const auto& e : std::filesystem::directory_iterator(dir_))
      if (e.path().extension() == ".json") return e.path().string();
    return "";
  }

  std::string dir_;
  LoadedModel lm_;
  ThreadPool pool_{1};
  int measured_ = 0;
  DiffFormat measured_format_ = DiffFormat::kF16;
};

TEST_F(SharingGateCache, IntactCacheIsReused) {
  auto a = run();
  ASSERT_TRUE(a.ok()) << a.error();
  EXPECT_FALSE(a->from_cache);
  auto b = run();
  ASSERT_TRUE(b.ok()) << b.error();
  EXPECT_TRUE(b->from_cache);
  EXPECT_EQ(measured_, 1);
  EXPECT_DOUBLE_EQ(b->kl_mean, a->kl_mean);
  EXPECT_EQ(b->pass, a->pass);
}

TEST_F(SharingGateCache, EachDiffFormatIsMeasuredAndCachedOnItsOwn) {
  ASSERT_TRUE(run().ok());
  measured_format_ = DiffFormat::kInt8;
  auto a = run(DiffFormat::kInt8);
  ASSERT_TRUE(a.ok()) << a.error();
  EXPECT_FALSE(a->from_cache) << "the f16 measurement is not int8's";
  EXPECT_EQ(a->path.format, DiffFormat::kInt8);
  EXPECT_NE(a->summary().find("diffs int8"), std::string::npos) << a->summary();
  auto b = run(DiffFormat::kInt8);
  ASSERT_TRUE(b.ok() && b->from_cache);
  EXPECT_EQ(measured_, 2);
  EXPECT_TRUE(std::filesystem::exists(std::filesystem::path(dir_) / "test-int8-0000000000001234-r0.1500-v1.json"));
}

TEST_F(SharingGateCache, EditedDamagedOrForeignCacheIsMeasuredAgain) {
  ASSERT_TRUE(run().ok());
  const std::string path = cache_file();
  ASSERT_FALSE(path.empty());
  const std::string good = read_all(path);
  const auto edit = [&](const std::string& from, const std::string& to) {
    std::string t = good;
    const size_t at = t.find(from);
    EXPECT_NE(at, std::string::npos) << from << " in " << good;
    return t.replace(at, from.size(), to);
  };
  const std::string no_checksum = good.substr(0, good.find(",\"checksum\"")) + "}\n";
  for (const std::string& bad : {edit("\"kl_mean\":0.02", "\"kl_mean\":0.001"), edit("\"agents\":2", "\"agents\":9"),
                                 no_checksum, good.substr(0, good.size() / 2), std::string("\x01\x02garbage")}) {
    write_all(path, bad);
    const int before = measured_;
    auto r = run();
    ASSERT_TRUE(r.ok()) << r.error();
    EXPECT_FALSE(r->from_cache) << bad;
    EXPECT_EQ(measured_, before + 1) << bad;
  }
  // The same bytes under another model's fingerprint are not that model's measurement.
  write_all(path, good);
  lm_.fingerprint = 0x9999;
  std::filesystem::copy_file(path, std::filesystem::path(path).replace_filename("test-0000000000009999-r0.1500-v1.json"));
  const int before = measured_;
  auto r = run();
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_FALSE(r->from_cache);
  EXPECT_EQ(measured_, before + 1);
}

}  // namespace
}  // namespace agentkv
