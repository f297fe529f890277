// The KV Redis tier on the real models, against a redis-server the test starts and kills: a prompt's
// full blocks are written to Redis as soon as one engine computes them (Redis is shared by servers;
// evicting them later writes nothing more); a second, fresh engine of the same model (what a second
// agentkv server is) restores every full prefix block from Redis (none prefilled, none in its RAM) and
// generates the same tokens with bit-identical logprobs.
#include "../unit/redis_test_server.h"
#include "engine_test_util.h"
#include "model/kv_arena.h"

namespace agentkv {
namespace {

using testing::genesis_prompts;
using testing::greedy_request;
using testing::real_model;
using testing::RequestOut;
using testing::run_one_request;

constexpr int kRedisModelBlock = 16;

class KvRedisTierModelTest : public ::testing::TestWithParam<std::string> {};

TEST_P(KvRedisTierModelTest, ASecondEngineRestoresFromRedisBitIdentical) {
  if (testing_redis::redis_server_binary().empty())
    GTEST_SKIP() << "redis-server is not installed (Debian redis-server; scripts/setup.sh installs it)";
  testing_redis::RedisTestServer redis;
  const std::string why = redis.start();
  ASSERT_TRUE(why.empty()) << why;
  const LoadedModel& lm = real_model(GetParam());
  ThreadPool pool(0);
  const RequestParams a = greedy_request(lm, genesis_prompts(1, 600, 600)[0], 8);
  const int64_t a_blocks = (int64_t(a.prompt.size()) + 8 + kRedisModelBlock - 1) / kRedisModelBlock;
  const int64_t full_blocks = int64_t(a.prompt.size() - 1) / kRedisModelBlock;
  EngineOptions eo;
  eo.kv.block_size = kRedisModelBlock;
  eo.kv.mem_bytes = KvArena::bytes_per_block(lm.config(), kRedisModelBlock) * (a_blocks + 4);
  eo.kv.redis.nodes = {RedisNode{"127.0.0.1", redis.port()}};

  RequestOut first;
  {
    auto engine = Engine::create(lm, eo, pool);
    ASSERT_TRUE(engine.ok()) << engine.error();
    first = run_one_request(**engine, a);
    (*engine)->kv().redis_tier()->flush();
    const EngineMetrics m = (*engine)->metrics();
    EXPECT_EQ(m.redis_tier.write_drops, 0u);
    EXPECT_EQ(m.redis_tier.write_errors, 0u);
    EXPECT_GE(int64_t(m.redis_tier.writes), full_blocks) << "written when computed, still in RAM";
  }
  auto engine = Engine::create(lm, eo, pool);  // the second server: nothing of the prompt in its RAM
  ASSERT_TRUE(engine.ok()) << engine.error();
  const RequestOut again = run_one_request(**engine, a);
  const EngineMetrics after = (*engine)->metrics();
  EXPECT_EQ(again[0].n_cached, full_blocks * kRedisModelBlock) << "every full prefix block restored";
  EXPECT_EQ(int64_t(after.redis_tier.hits), full_blocks);
  EXPECT_EQ(after.redis_tier.rejected, 0u);
  EXPECT_EQ(after.redis_tier.fallbacks, 0u);
  EXPECT_EQ(after.prefix_hit_blocks, 0u) << "nothing came from RAM";
  EXPECT_EQ(int64_t(after.tokens_prefilled), int64_t(a.prompt.size()) - full_blocks * kRedisModelBlock)
      << "only the tail after the restored blocks is prefilled";
  testing::expect_same_outputs({first}, {again}, 0.0f, "restored from Redis by a second engine vs prefilled");
}

INSTANTIATE_TEST_SUITE_P(BothModels, KvRedisTierModelTest, ::testing::Values("smollm2", "gemma3"));

}  // namespace
}  // namespace agentkv
