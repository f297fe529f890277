// The disk tier (kv/disk_tier.h) with the tiny geometry, no model: records are written once and
// nothing half-written is visible, a record that fails a check is deleted and counted, a full queue
// drops (and counts) instead of waiting, the size budget removes the oldest; and through KvManager,
// prefix blocks evicted from RAM come back from disk bit for bit on a prefix lookup.
#include "kv/disk_tier.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <numeric>
#include <string>
#include <vector>

#include "kv/kv_manager.h"
#include "model/kv_arena.h"
#include "tiny_kv_config.h"

namespace agentkv {
namespace {

namespace fs = std::filesystem;
using testing_kv::tiny_config;
using Tokens = std::vector<int32_t>;

constexpr uint64_t kDiskFp = 77;
using testing_kv::kBlock;
constexpr int64_t kDiskBlockBytes = testing_kv::kTinyBlockBytes4;

// A fresh directory per test, removed afterwards.
struct TempDir {
  std::string path;
  TempDir() {
    path = ::testing::TempDir() + "agentkv_disk_tier_" + std::to_string(::getpid()) + "_" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    fs::remove_all(path);
  }
  ~TempDir() { fs::remove_all(path); }
  std::vector<std::string> names() const {
    std::vector<std::string> out;
    for (const auto& e : fs::directory_iterator(path)) out.push_back(e.path().filename().string());
    return out;
  }
};

TierRecordShape tiny_shape() {
  KvArena arena(tiny_config(), kBlock, 1);
  return tier_shape_of(arena, tiny_config().n_head_kv, tiny_config().head_dim);
}

std::unique_ptr<DiskTier> open_tier(const std::string& dir, int64_t max_bytes = 0, int max_queued = 64) {
  auto t = DiskTier::open(DiskTierOptions{dir, max_bytes, max_queued}, kDiskFp, tiny_shape());
  EXPECT_TRUE(t.ok()) << t.error();
  return std::move(t).value();
}

std::vector<uint8_t> payload(uint8_t first) {
  std::vector<uint8_t> p(static_cast<size_t>(kDiskBlockBytes));
  std::iota(p.begin(), p.end(), first);
  return p;
}

const Tokens kTokens{1, 2, 3, 4};

TEST(DiskTier, WritesOnceAndLoadsWhatWasStored) {
  TempDir d;
  auto t = open_tier(d.path);
  t->store(10, kTokens, payload(1));
  t->flush();
  ASSERT_TRUE(fs::exists(t->path_of(10)));
  t->store(10, kTokens, payload(2));  // the same block again: the first record stays
  t->flush();
  std::vector<uint8_t> out(static_cast<size_t>(kDiskBlockBytes));
  ASSERT_TRUE(t->load(10, kTokens, out));
  EXPECT_EQ(out, payload(1));
  EXPECT_FALSE(t->load(11, kTokens, out));  // never stored
  const TierStats s = t->stats();
  EXPECT_EQ(s.writes, 1u);
  EXPECT_EQ(s.hits, 1u);
  EXPECT_EQ(s.misses, 1u);
  EXPECT_EQ(s.rejected, 0u);
  EXPECT_EQ(d.names(), std::vector<std::string>{fs::path(t->path_of(10)).filename().string()})
      << "a temp file was left behind";
}

TEST(DiskTier, ARecordThatFailsACheckIsDeletedAndNeverUsed) {
  TempDir d;
  auto t = open_tier(d.path);
  t->store(10, kTokens, payload(1));
  t->flush();
  std::vector<uint8_t> out(static_cast<size_t>(kDiskBlockBytes));
  EXPECT_FALSE(t->load(10, Tokens{1, 2, 3, 5}, out)) << "other tokens under the same hash";
  EXPECT_FALSE(fs::exists(t->path_of(10)));

  // Corrupted on disk: one byte changed.
  t->store(10, kTokens, payload(1));
  t->flush();
  {
    std::fstream f(t->path_of(10), std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(100);
    f.put('\x5a');
  }
  EXPECT_FALSE(t->load(10, kTokens, out));
  EXPECT_FALSE(fs::exists(t->path_of(10)));

  // Truncated, and another model's record under this model's name.
  t->store(10, kTokens, payload(1));
  t->flush();
  fs::resize_file(t->path_of(10), 50);
  EXPECT_FALSE(t->load(10, kTokens, out));
  auto other = DiskTier::open(DiskTierOptions{d.path}, kDiskFp + 1, tiny_shape());
  ASSERT_TRUE(other.ok());
  (*other)->store(10, kTokens, payload(1));
  (*other)->flush();
  fs::rename((*other)->path_of(10), t->path_of(10));
  EXPECT_FALSE(t->load(10, kTokens, out));
  EXPECT_FALSE(fs::exists(t->path_of(10)));

  const TierStats s = t->stats();
  EXPECT_EQ(s.rejected, 4u);
  EXPECT_EQ(s.misses, 4u);
  EXPECT_EQ(s.hits, 0u);
  EXPECT_TRUE(d.names().empty());
}

TEST(DiskTier, AFullQueueDropsAndCounts) {
  TempDir d;
  auto t = open_tier(d.path, 0, 3);
  t->hold_writer_for_testing(true);
  for (uint64_t h = 1; h <= 5; ++h) t->store(h, kTokens, payload(uint8_t(h)));
  EXPECT_EQ(t->stats().write_drops, 2u);
  t->hold_writer_for_testing(false);
  t->flush();
  const TierStats s = t->stats();
  EXPECT_EQ(s.writes, 3u);
  EXPECT_EQ(s.write_drops, 2u);
  std::vector<uint8_t> out(static_cast<size_t>(kDiskBlockBytes));
  EXPECT_TRUE(t->load(3, kTokens, out));
  EXPECT_FALSE(t->load(4, kTokens, out));
}

TEST(DiskTier, ABlockStillQueuedIsFoundThere) {
  TempDir d;
  auto t = open_tier(d.path);
  t->hold_writer_for_testing(true);
  t->store(10, kTokens, payload(3));
  std::vector<uint8_t> out(static_cast<size_t>(kDiskBlockBytes));
  EXPECT_FALSE(t->load(10, Tokens{1, 2, 3, 5}, out)) << "other tokens";
  ASSERT_TRUE(t->load(10, kTokens, out));
  EXPECT_EQ(out, payload(3));
  EXPECT_FALSE(fs::exists(t->path_of(10))) << "not written yet";
  t->hold_writer_for_testing(false);
  t->flush();
  EXPECT_TRUE(fs::exists(t->path_of(10)));
  EXPECT_EQ(t->stats().hits, 1u);
}

TEST(DiskTier, SizeBudgetRemovesTheOldestAndCountsWhatIsThere) {
  TempDir d;
  const int64_t record = int64_t(encode_tier_record(TierRecordKey{kDiskFp, 1, kTokens, tiny_shape()}, payload(0)).size());
  {
    auto t = open_tier(d.path, record * 2 + record / 2);
    for (uint64_t h = 1; h <= 4; ++h) {
      t->store(h, kTokens, payload(uint8_t(h)));
      t->flush();
    }
    const TierStats s = t->stats();
    EXPECT_EQ(s.writes, 4u);
    EXPECT_EQ(s.removed, 2u);
    EXPECT_EQ(s.bytes, 2 * record);
    EXPECT_FALSE(fs::exists(t->path_of(1)));
    EXPECT_FALSE(fs::exists(t->path_of(2)));
    EXPECT_TRUE(fs::exists(t->path_of(4)));
  }
  {
    auto reopened = open_tier(d.path);
    EXPECT_EQ(reopened->stats().bytes, 2 * record) << "records already in the directory count";
  }
  auto smaller = open_tier(d.path, record);
  EXPECT_EQ(smaller->stats().bytes, record) << "a smaller budget applies when the tier opens";
  EXPECT_EQ(smaller->stats().removed, 1u);
}

TEST(DiskTier, AFailedWriteLeavesNothingVisible) {
  TempDir d;
  auto t = open_tier(d.path);
  fs::remove_all(d.path);  // gone after open: the temp file cannot be created
  t->store(10, kTokens, payload(1));
  t->flush();
  EXPECT_EQ(t->stats().write_errors, 1u);
  EXPECT_EQ(t->stats().writes, 0u);
  EXPECT_FALSE(fs::exists(d.path));
}

TEST(DiskTier, ARecordWrittenAgainAfterARejectionKeepsItsPlaceInTheBudget) {
  TempDir d;
  const int64_t record = int64_t(encode_tier_record(TierRecordKey{kDiskFp, 1, kTokens, tiny_shape()}, payload(0)).size());
  auto t = open_tier(d.path, 2 * record);
  std::vector<uint8_t> out(static_cast<size_t>(kDiskBlockBytes));
  t->store(1, kTokens, payload(1));
  t->flush();
  fs::resize_file(t->path_of(1), 10);
  EXPECT_FALSE(t->load(1, kTokens, out));  // rejected and deleted
  t->store(2, kTokens, payload(2));
  t->flush();
  t->store(1, kTokens, payload(1));  // block 1 written again: now the newest
  t->flush();
  t->store(3, kTokens, payload(3));  // over the budget: the oldest live record (2) goes, not 1
  t->flush();
  EXPECT_FALSE(fs::exists(t->path_of(2)));
  EXPECT_TRUE(t->load(1, kTokens, out));
  EXPECT_TRUE(t->load(3, kTokens, out));
  EXPECT_EQ(t->stats().bytes, 2 * record);
}

TEST(DiskTier, RefusesADirectoryItCannotCreate) {
  TempDir d;
  { std::ofstream(d.path) << "a file"; }
  auto t = DiskTier::open(DiskTierOptions{d.path + "/sub"}, kDiskFp, tiny_shape());
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.error().find(d.path), std::string::npos) << t.error();
  fs::remove(d.path);
}

// Through KvManager: blocks of a released prompt are evicted by other work, written to disk, and a
// later prompt with the same prefix gets them back (same bytes, no RAM hit) instead of recomputing.
std::unique_ptr<KvManager> manager_with_disk(const std::string& dir, int64_t n_blocks) {
  return testing_kv::make_tiered_manager(n_blocks, kDiskFp, DiskTierOptions{dir});
}

TEST(DiskTier, EvictedPrefixBlocksAreRestoredBitForBit) {
  TempDir d;
  auto m = manager_with_disk(d.path, 3);
  const Tokens prompt{1, 2, 3, 4, 5, 6, 7, 8, 9};
  std::vector<std::vector<uint8_t>> bytes;
  {
    KvSequence a(*m);
    testing_kv::commit_patterned(a, Tokens(prompt.begin(), prompt.begin() + 8));
    for (int32_t b : a.blocks()) {
      auto* p = reinterpret_cast<const uint8_t*>(m->arena().block_data(b));
      bytes.emplace_back(p, p + kDiskBlockBytes);
    }
  }
  {
    KvSequence other(*m);  // three blocks of other tokens evict both cached blocks
    testing_kv::commit_patterned(other, Tokens{50, 51, 52, 53, 60, 61, 62, 63, 70, 71, 72, 73});
  }
  m->disk_tier()->flush();
  EXPECT_EQ(m->disk_tier()->stats().writes, 2u);
  EXPECT_EQ(cached_prefix_tokens(*m, prompt, 0), 0) << "the prompt's blocks are no longer in RAM";

  KvSequence again(*m);
  EXPECT_EQ(again.match_prefix(prompt), 8);
  for (size_t i = 0; i < 2; ++i) {
    auto* p = reinterpret_cast<const uint8_t*>(m->arena().block_data(again.blocks()[i]));
    EXPECT_EQ(std::vector<uint8_t>(p, p + kDiskBlockBytes), bytes[i]) << "block " << i;
    EXPECT_TRUE(m->pool().is_cached(again.blocks()[i])) << "restored blocks are back in the prefix index";
  }
  EXPECT_EQ(m->pool().stats().hits, 0);
  EXPECT_EQ(m->disk_tier()->stats().hits, 2u);
}

TEST(DiskTier, ACorruptRecordEndsThePrefixMatchThere) {
  TempDir d;
  auto m = manager_with_disk(d.path, 3);
  const Tokens prompt{1, 2, 3, 4, 5, 6, 7, 8, 9};
  uint64_t second_hash = 0;
  {
    KvSequence a(*m);
    testing_kv::commit_patterned(a, Tokens(prompt.begin(), prompt.begin() + 8));
    second_hash = m->pool().chain_hash(m->pool().chain_hash(0, Tokens{1, 2, 3, 4}, 0), Tokens{5, 6, 7, 8}, 0);
  }
  {
    KvSequence other(*m);
    testing_kv::commit_patterned(other, Tokens{50, 51, 52, 53, 60, 61, 62, 63, 70, 71, 72, 73});
  }
  m->disk_tier()->flush();
  const std::string second = m->disk_tier()->path_of(second_hash);
  ASSERT_TRUE(fs::exists(second));
  fs::resize_file(second, fs::file_size(second) - 1);
  KvSequence again(*m);
  EXPECT_EQ(again.match_prefix(prompt), 4) << "the first block restores, the truncated second is recomputed";
  EXPECT_FALSE(fs::exists(second));
  EXPECT_EQ(m->disk_tier()->stats().rejected, 1u);
}

}  // namespace
}  // namespace agentkv
