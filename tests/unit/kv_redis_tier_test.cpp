// The Redis tier (kv/redis_tier.h) against a redis-server each test starts and kills itself, with
// the tiny geometry and no model: records round-trip and are written once (SET NX, with a TTL);
// corrupted, truncated, other-model and other-version values written straight into Redis are rejected,
// deleted and counted; a killed or hung Redis makes lookups fallbacks in bounded time and writes
// errors, and a restarted one is reconnected; two nodes share the keys, each key on its node; and
// through KvManager, a block another manager evicted comes back from Redis and lands on the disk.
#include "kv/redis_tier.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <functional>
#include <numeric>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "kv/kv_manager.h"
#include "model/kv_arena.h"
#include "redis_test_server.h"
#include "tiny_kv_config.h"

namespace agentkv {
namespace {

using testing_kv::tiny_config;
using testing_redis::RedisTestServer;
using Tokens = std::vector<int32_t>;

constexpr uint64_t kRedisFp = 78;
constexpr int64_t kRedisBlockBytes = testing_kv::kTinyBlockBytes4;
const Tokens kRedisTokens{1, 2, 3, 4};

TierRecordShape redis_tiny_shape() {
  KvArena arena(tiny_config(), testing_kv::kBlock, 1);
  return tier_shape_of(arena, tiny_config().n_head_kv, tiny_config().head_dim);
}

std::vector<uint8_t> redis_payload(uint8_t first) {
  std::vector<uint8_t> p(static_cast<size_t>(kRedisBlockBytes));
  std::iota(p.begin(), p.end(), first);
  return p;
}

std::string as_text(const std::vector<uint8_t>& b) { return std::string(reinterpret_cast<const char*>(b.data()), b.size()); }

double seconds_of(const std::function<void()>& f) {
  const auto t0 = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

class KvRedisTier : public ::testing::Test {
 protected:
  void SetUp() override {
    if (testing_redis::redis_server_binary().empty())
      GTEST_SKIP() << "redis-server is not installed (Debian redis-server; scripts/setup.sh installs it)";
    const std::string why = server.start();
    ASSERT_TRUE(why.empty()) << why;
  }
  RedisTierOptions options(std::vector<const RedisTestServer*> nodes = {}) const {
    RedisTierOptions o;
    if (nodes.empty()) nodes.push_back(&server);
    for (const RedisTestServer* s : nodes) o.nodes.push_back(RedisNode{"127.0.0.1", s->port()});
    o.retry_min_ms = 20;
    o.retry_max_ms = 100;
    return o;
  }
  std::unique_ptr<RedisTier> open_tier(const RedisTierOptions& o, uint64_t fingerprint = kRedisFp) const {
    auto t = RedisTier::open(o, fingerprint, redis_tiny_shape());
    EXPECT_TRUE(t.ok()) << t.error();
    return std::move(t).value();
  }
  RedisTestServer server;
};

TEST_F(KvRedisTier, RoundTripWrittenOnceWithATtl) {
  RedisTierOptions o = options();
  o.ttl_s = 600;
  auto t = open_tier(o);
  t->store(10, kRedisTokens, redis_payload(1));
  t->flush();
  ASSERT_TRUE(server.has_key(t->key_of(10)));
  EXPECT_EQ(t->key_of(10), "agentkv:v" + std::to_string(kTierRecordVersion) + ":000000000000004e:000000000000000a");
  const auto ttl = server.command({"TTL", t->key_of(10)});
  ASSERT_TRUE(ttl && ttl->type == REDIS_REPLY_INTEGER);
  EXPECT_GT(ttl->integer, 0);
  EXPECT_LE(ttl->integer, 600);
  t->store(10, kRedisTokens, redis_payload(2));  // the same block again: the first record stays (NX)
  t->flush();
  std::vector<uint8_t> out(static_cast<size_t>(kRedisBlockBytes));
  ASSERT_TRUE(t->load(10, kRedisTokens, out));
  EXPECT_EQ(out, redis_payload(1));
  EXPECT_FALSE(t->load(11, kRedisTokens, out));  // never stored
  // A second tier (another process's) finds the record too.
  auto other = open_tier(options());
  ASSERT_TRUE(other->load(10, kRedisTokens, out));
  EXPECT_EQ(out, redis_payload(1));
  const TierStats s = t->stats();
  EXPECT_EQ(s.writes, 1u);
  EXPECT_EQ(s.write_errors, 0u);
  EXPECT_EQ(s.hits, 1u);
  EXPECT_EQ(s.misses, 1u);
  EXPECT_EQ(s.rejected, 0u);
  EXPECT_EQ(s.fallbacks, 0u);
}

TEST_F(KvRedisTier, BadRecordsAreRejectedDeletedAndCounted) {
  auto t = open_tier(options());
  const std::string key = t->key_of(10);
  const std::vector<uint8_t> good =
      encode_tier_record(TierRecordKey{kRedisFp, 10, kRedisTokens, redis_tiny_shape()}, redis_payload(1));
  std::vector<uint8_t> corrupt = good, truncated(good.begin(), good.end() - 1), other_version = good;
  corrupt[100] ^= 0x5a;
  const uint32_t version = kTierRecordVersion + 1;
  std::memcpy(other_version.data() + 8, &version, sizeof version);  // right after the 8-byte magic
  const std::vector<uint8_t> other_model =
      encode_tier_record(TierRecordKey{kRedisFp + 1, 10, kRedisTokens, redis_tiny_shape()}, redis_payload(1));
  std::vector<uint8_t> out(static_cast<size_t>(kRedisBlockBytes));
  int n = 0;
  const std::vector<uint8_t>* bad_values[] = {&corrupt, &truncated, &other_model, &other_version};
  for (const std::vector<uint8_t>* bad : bad_values) {
    SCOPED_TRACE("bad value " + std::to_string(n++));
    ASSERT_TRUE(server.command({"SET", key, as_text(*bad)}));
    EXPECT_FALSE(t->load(10, kRedisTokens, out));
    EXPECT_FALSE(server.has_key(key)) << "a rejected record is deleted";
  }
  ASSERT_TRUE(server.command({"SET", key, as_text(good)}));
  EXPECT_FALSE(t->load(10, Tokens{1, 2, 3, 5}, out)) << "other tokens under the same hash";
  const TierStats s = t->stats();
  EXPECT_EQ(s.rejected, 5u);
  EXPECT_EQ(s.misses, 5u);
  EXPECT_EQ(s.hits, 0u);
  EXPECT_EQ(s.fallbacks, 0u);
}

TEST_F(KvRedisTier, AKilledRedisIsAFallbackInBoundedTime) {
  auto t = open_tier(options());
  t->store(10, kRedisTokens, redis_payload(1));
  t->flush();
  server.kill();
  std::vector<uint8_t> out(static_cast<size_t>(kRedisBlockBytes));
  const double took = seconds_of([&] {
    for (int i = 0; i < 50; ++i) EXPECT_FALSE(t->load(10, kRedisTokens, out));
  });
  EXPECT_LT(took, 1.0) << "lookups must not wait on a dead node";
  const double wrote = seconds_of([&] {
    for (uint64_t h = 20; h < 25; ++h) t->store(h, kRedisTokens, redis_payload(uint8_t(h)));
    t->flush();
  });
  EXPECT_LT(wrote, 5.0);
  const TierStats s = t->stats();
  EXPECT_EQ(s.fallbacks, 50u);
  EXPECT_EQ(s.misses, 50u);
  EXPECT_EQ(s.hits, 0u);
  EXPECT_EQ(s.writes, 1u);
  EXPECT_EQ(s.write_errors, 5u);
}

TEST_F(KvRedisTier, AHungRedisTimesOut) {
  RedisTierOptions o = options();
  o.timeout_ms = 50;
  o.retry_min_ms = o.retry_max_ms = 2000;  // no second attempt inside this test
  auto t = open_tier(o);
  std::vector<uint8_t> out(static_cast<size_t>(kRedisBlockBytes));
  EXPECT_FALSE(t->load(10, kRedisTokens, out));  // connected, nothing there
  server.pause(true);
  const double first = seconds_of([&] { EXPECT_FALSE(t->load(10, kRedisTokens, out)); });
  const double rest = seconds_of([&] {
    for (int i = 0; i < 20; ++i) EXPECT_FALSE(t->load(10, kRedisTokens, out));
  });
  server.pause(false);
  EXPECT_GE(first, 0.04) << "the lookup waited for its timeout";
  EXPECT_LT(first, 0.5);
  EXPECT_LT(rest, 0.1) << "a node that timed out is not asked again before its backoff";
  EXPECT_EQ(t->stats().fallbacks, 21u);
}

TEST_F(KvRedisTier, ARestartedRedisIsReconnected) {
  auto t = open_tier(options());
  std::vector<uint8_t> out(static_cast<size_t>(kRedisBlockBytes));
  EXPECT_FALSE(t->load(10, kRedisTokens, out));
  const int port = server.port();
  server.kill();
  EXPECT_FALSE(t->load(10, kRedisTokens, out));
  EXPECT_EQ(t->stats().fallbacks, 1u);
  const std::string why = server.start(port);  // empty again: a flushed Redis
  ASSERT_TRUE(why.empty()) << why;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(3);
  uint64_t fallbacks = 0;
  do {
    fallbacks = t->stats().fallbacks;
    EXPECT_FALSE(t->load(10, kRedisTokens, out));
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  } while (t->stats().fallbacks > fallbacks && std::chrono::steady_clock::now() < deadline);
  EXPECT_EQ(t->stats().fallbacks, fallbacks) << "the reader reconnected";
  // The writer reconnects too (its first write may still meet the old, closed connection).
  for (int i = 0; i < 20 && !server.has_key(t->key_of(10)); ++i) {
    t->store(10, kRedisTokens, redis_payload(7));
    t->flush();
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
  }
  ASSERT_TRUE(t->load(10, kRedisTokens, out));
  EXPECT_EQ(out, redis_payload(7));
}

TEST_F(KvRedisTier, TwoNodesEachHoldTheirKeys) {
  RedisTestServer second;
  const std::string why = second.start();
  ASSERT_TRUE(why.empty()) << why;
  const RedisTestServer* nodes[] = {&server, &second};
  auto t = open_tier(options({&server, &second}));
  size_t on[2] = {0, 0};
  for (uint64_t i = 1; i <= 16; ++i) t->store(i * 0x9e3779b97f4a7c15ULL, kRedisTokens, redis_payload(uint8_t(i)));
  t->flush();
  std::vector<uint8_t> out(static_cast<size_t>(kRedisBlockBytes));
  for (uint64_t i = 1; i <= 16; ++i) {
    const uint64_t h = i * 0x9e3779b97f4a7c15ULL;
    const size_t node = t->node_of(h);
    ASSERT_LT(node, 2u);
    ++on[node];
    EXPECT_TRUE(nodes[node]->has_key(t->key_of(h))) << "block " << i << " on its node";
    EXPECT_FALSE(nodes[1 - node]->has_key(t->key_of(h))) << "block " << i << " only there";
    EXPECT_TRUE(t->load(h, kRedisTokens, out));
    EXPECT_EQ(out, redis_payload(uint8_t(i)));
  }
  EXPECT_GT(on[0], 0u);
  EXPECT_GT(on[1], 0u);
  // The same node list in another process gives the same placement.
  auto again = open_tier(options({&server, &second}));
  for (uint64_t i = 1; i <= 16; ++i) EXPECT_EQ(again->node_of(i * 0x9e3779b97f4a7c15ULL), t->node_of(i * 0x9e3779b97f4a7c15ULL));
  EXPECT_EQ(t->stats().writes, 16u);
}

// Through KvManager: Redis is shared by several servers, so a block goes to it as soon as it is computed
// (not when it leaves RAM, and not again then); a second, fresh manager of the same model (what a
// second server does) restores it bit for bit and copies it to its disk tier above.
TEST_F(KvRedisTier, ASecondManagerRestoresFromRedisAndKeepsItOnDisk) {
  const Tokens prompt{1, 2, 3, 4, 5, 6, 7, 8, 9};
  std::vector<std::vector<uint8_t>> bytes;
  {
    auto first = testing_kv::make_tiered_manager(3, kRedisFp, {}, options());
    {
      KvSequence a(*first);
      testing_kv::commit_patterned(a, Tokens(prompt.begin(), prompt.begin() + 8));
      for (int32_t b : a.blocks()) {
        auto* p = reinterpret_cast<const uint8_t*>(first->arena().block_data(b));
        bytes.emplace_back(p, p + kRedisBlockBytes);
      }
      first->redis_tier()->flush();
      EXPECT_EQ(first->redis_tier()->stats().writes, 2u) << "written when computed, still in RAM";
    }
    KvSequence other(*first);  // evicts both cached blocks: Redis has them already
    testing_kv::commit_patterned(other, Tokens{50, 51, 52, 53, 60, 61, 62, 63, 70, 71, 72, 73});
    first->redis_tier()->flush();
    EXPECT_EQ(first->redis_tier()->stats().writes, 5u) << "the three new blocks; the evicted two not again";
  }
  const std::string dir = ::testing::TempDir() + "agentkv_redis_tier_disk_" + std::to_string(::getpid());
  std::filesystem::remove_all(dir);
  {
    auto second = testing_kv::make_tiered_manager(3, kRedisFp, DiskTierOptions{dir}, options());
    ASSERT_EQ(second->tiers().size(), 2u);
    EXPECT_STREQ(second->tiers()[0]->name(), "disk");
    EXPECT_STREQ(second->tiers()[1]->name(), "redis");
    KvSequence again(*second);
    EXPECT_EQ(again.match_prefix(prompt), 8);
    for (size_t i = 0; i < 2; ++i) {
      auto* p = reinterpret_cast<const uint8_t*>(second->arena().block_data(again.blocks()[i]));
      EXPECT_EQ(std::vector<uint8_t>(p, p + kRedisBlockBytes), bytes[i]) << "block " << i;
    }
    EXPECT_EQ(second->redis_tier()->stats().hits, 2u);
    EXPECT_EQ(second->disk_tier()->stats().misses, 2u);
    second->disk_tier()->flush();
    EXPECT_EQ(second->disk_tier()->stats().writes, 2u) << "a Redis hit is kept on the local disk too";
  }
  std::filesystem::remove_all(dir);
}

// Before an agent moves to another server, its context's exact blocks are queued again: what Redis lost
// (flushed, expired) is written back; approximate blocks never are; flush_shared_tiers waits for them.
TEST_F(KvRedisTier, PublishSequenceWritesBackTheExactBlocksOnly) {
  auto m = testing_kv::make_tiered_manager(4, kRedisFp, {}, options());
  KvSequence a(*m);
  testing_kv::commit_patterned(a, Tokens{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13});  // 3 full blocks + 1
  ASSERT_TRUE(m->flush_shared_tiers(std::chrono::seconds(10)));
  EXPECT_EQ(m->redis_tier()->stats().writes, 3u);
  server.command({"FLUSHALL"});
  EXPECT_EQ(m->publish_sequence(a), 3);
  ASSERT_TRUE(m->flush_shared_tiers(std::chrono::seconds(10)));
  EXPECT_EQ(m->redis_tier()->stats().writes, 6u) << "the three blocks Redis lost are written again";
  for (uint64_t h : a.block_hashes()) EXPECT_TRUE(server.has_key(m->redis_tier()->key_of(h)));
  KvSequence approx = a.fork();
  approx.mark_approximate_from(4);  // from the second block on
  EXPECT_EQ(m->publish_sequence(approx), 1);
}

// Chat-sharing segment masters' index records (kv/segment_index_record.h): written once with the TTL
// under their own key family by their own writer, found by another process's tier, and a bad value is
// rejected, deleted and counted apart from the block stats.
TEST_F(KvRedisTier, SegmentIndexRecordsRoundTripUnderTheirOwnKeys) {
  RedisTierOptions o = options();
  o.ttl_s = 600;
  auto t = open_tier(o);
  const Tokens master{1, 2, 3, 4, 5, 6, 7, 8, 9}, segment{6, 7, 8, 9};
  t->store_segment(master, 5);
  t->store_segment(Tokens{9, 9, 6, 7, 8, 9}, 2);  // another master of the same segment: the first stays (NX)
  ASSERT_TRUE(t->flush_segments_for(std::chrono::seconds(10)));
  const std::string key = t->segment_key_of(segment_key(segment));
  EXPECT_EQ(key.rfind("agentkv:seg:v1:000000000000004e:", 0), 0u) << key;
  ASSERT_TRUE(server.has_key(key));
  const auto ttl = server.command({"TTL", key});
  ASSERT_TRUE(ttl && ttl->type == REDIS_REPLY_INTEGER);
  EXPECT_GT(ttl->integer, 0);
  EXPECT_LE(ttl->integer, 600);
  auto other = open_tier(options());
  const std::optional<SegmentIndex> got = other->load_segment(segment);
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->tokens, master);
  EXPECT_EQ(got->begin, 5);
  EXPECT_EQ(got->end, 9);
  EXPECT_FALSE(other->load_segment(Tokens{6, 7, 8}).has_value());  // never stored
  EXPECT_EQ(t->segment_stats().writes, 1u);
  const TierStats s = other->segment_stats();
  EXPECT_EQ(s.hits, 1u);
  EXPECT_EQ(s.misses, 1u);
  EXPECT_EQ(other->stats().hits + other->stats().misses, 0u) << "block stats are apart";

  // Bad values: a corrupt record, one of another model, a block record under the segment's key.
  std::vector<uint8_t> corrupt = encode_segment_index(kRedisFp, master, 5);
  corrupt[corrupt.size() / 2] ^= 0x5a;
  const std::vector<std::vector<uint8_t>> bad_values{
      corrupt, encode_segment_index(kRedisFp + 1, master, 5),
      encode_tier_record(TierRecordKey{kRedisFp, 10, kRedisTokens, redis_tiny_shape()}, redis_payload(1))};
  for (const std::vector<uint8_t>& bad : bad_values) {
    ASSERT_TRUE(server.command({"SET", key, as_text(bad)}));
    EXPECT_FALSE(other->load_segment(segment).has_value());
    EXPECT_FALSE(server.has_key(key)) << "a rejected record is deleted";
  }
  EXPECT_EQ(other->segment_stats().rejected, 3u);
  EXPECT_EQ(other->segment_stats().fallbacks, 0u);
  // A killed Redis: a fallback, in bounded time.
  server.kill();
  const double took = seconds_of([&] { EXPECT_FALSE(other->load_segment(segment).has_value()); });
  EXPECT_LT(took, 2.0);
  EXPECT_EQ(other->segment_stats().fallbacks, 1u);
}

TEST(RedisNodes, ParsesHostPortLists) {
  auto one = parse_redis_nodes("127.0.0.1:6379");
  ASSERT_TRUE(one.ok()) << one.error();
  ASSERT_EQ(one->size(), 1u);
  EXPECT_EQ((*one)[0].host, "127.0.0.1");
  EXPECT_EQ((*one)[0].port, 6379);
  auto three = parse_redis_nodes("a:1,[::1]:7000,redis.local:65535");
  ASSERT_TRUE(three.ok()) << three.error();
  ASSERT_EQ(three->size(), 3u);
  EXPECT_EQ((*three)[1].host, "::1");
  EXPECT_EQ((*three)[1].port, 7000);
  EXPECT_EQ((*three)[2].port, 65535);
  for (const char* bad : {"", "host", "host:", ":6379", "h:0", "h:65536", "h:12x", "a:1,", "a:1,,b:2"}) {
    auto r = parse_redis_nodes(bad);
    EXPECT_FALSE(r.ok()) << "'" << bad << "'";
  }
}

}  // namespace
}  // namespace agentkv
