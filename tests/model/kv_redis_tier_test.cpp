// The KV Redis tier on the real models, against a redis-server the test starts and kills: a prompt's
// full blocks are written to Redis as soon as one engine computes them (Redis is shared by servers;
// evicting them later writes nothing more); a second, fresh engine of the same model (what a second
// agentkv server is) restores every full prefix block from Redis (none prefilled, none in its RAM) and
// generates the same tokens with bit-identical logprobs.
#include "../unit/redis_test_server.h"
#include "engine/chat_sharing.h"
#include "engine/collective_round.h"
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

// Each test gets a redis-server of its own, started here and killed after it.
class KvRedisTierModelTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (testing_redis::redis_server_binary().empty())
      GTEST_SKIP() << "redis-server is not installed (Debian redis-server; scripts/setup.sh installs it)";
    const std::string why = redis.start();
    ASSERT_TRUE(why.empty()) << why;
  }
  // What every engine (server) of a test runs with: blocks of kRedisModelBlock, this test's Redis.
  EngineOptions redis_engine_options() const {
    EngineOptions eo;
    eo.kv.block_size = kRedisModelBlock;
    eo.kv.redis.nodes = {RedisNode{"127.0.0.1", redis.port()}};
    return eo;
  }
  testing_redis::RedisTestServer redis;
};

TEST_P(KvRedisTierModelTest, ASecondEngineRestoresFromRedisBitIdentical) {
  const LoadedModel& lm = real_model(GetParam());
  ThreadPool pool(0);
  const RequestParams a = greedy_request(lm, genesis_prompts(1, 600, 600)[0], 8);
  const int64_t a_blocks = (int64_t(a.prompt.size()) + 8 + kRedisModelBlock - 1) / kRedisModelBlock;
  const int64_t full_blocks = int64_t(a.prompt.size() - 1) / kRedisModelBlock;
  EngineOptions eo = redis_engine_options();
  eo.kv.mem_bytes = KvArena::bytes_per_block(lm.config(), kRedisModelBlock) * (a_blocks + 4);

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

// A round's master ([BOS][block], TokenDance) is an exact prefix sequence: its blocks go to Redis when one
// engine computes them, and a second engine (another server) running a round over the same block
// restores them instead of prefilling: only the master's partial last block is computed there. Its
// agents' answers are the first engine's, token for token (the blends start from the same master KV).
TEST_P(KvRedisTierModelTest, ARoundMasterComputedOnOneEngineIsRestoredByAnother) {
  const LoadedModel& lm = real_model(GetParam());
  const Tokenizer& tok = *lm.tokenizer;
  ThreadPool pool(0);
  const EngineOptions eo = redis_engine_options();
  const std::vector<int32_t> block = tok.encode(genesis_prompts(1, 1400, 1400, 331)[0], false, false);
  auto turns_for = [&] {
    std::vector<RoundTurn> turns;
    for (const char* who : {"Ada, a baker", "Bram, a smith", "Cleo, a teacher"}) {
      RoundTurn t;
      t.params = greedy_request(lm, std::string("You are ") + who + ". Read this and say what matters:\n", 6);
      const int64_t start = int64_t(t.params.prompt.size());
      t.params.prompt.insert(t.params.prompt.end(), block.begin(), block.end());
      t.segment = {start, start + int64_t(block.size())};
      const std::vector<int32_t> own = tok.encode("\nIn one sentence:", false, false);
      t.params.prompt.insert(t.params.prompt.end(), own.begin(), own.end());
      turns.push_back(std::move(t));
    }
    return turns;
  };
  auto run_round = [&](Engine& e) { return testing::run_collective_round(e, turns_for(), 0.15); };
  const int64_t master_tokens = int64_t(tok.add_bos_default()) + int64_t(block.size());
  CollectiveRoundResult first;
  {
    auto engine = Engine::create(lm, eo, pool);
    ASSERT_TRUE(engine.ok()) << engine.error();
    first = run_round(**engine);
    ASSERT_TRUE(first.status.ok()) << first.status.error();
    EXPECT_EQ(first.sharing.mode, "tokendance");
    EXPECT_EQ(first.sharing.master_tokens_computed, master_tokens);
    ASSERT_TRUE((*engine)->kv().flush_shared_tiers(std::chrono::seconds(30)));
  }
  auto engine = Engine::create(lm, eo, pool);  // the second server
  ASSERT_TRUE(engine.ok()) << engine.error();
  const CollectiveRoundResult second = run_round(**engine);
  ASSERT_TRUE(second.status.ok()) << second.status.error();
  EXPECT_EQ(second.sharing.mode, "tokendance");
  // A prefix match leaves the last token to compute, so the last block it restores ends before it.
  const int64_t restorable = (master_tokens - 1) / kRedisModelBlock * kRedisModelBlock;
  EXPECT_EQ(second.sharing.master_tokens_computed, master_tokens - restorable)
      << "every full block of the master restored from Redis";
  EXPECT_GE(int64_t((*engine)->metrics().redis_tier.hits), master_tokens / kRedisModelBlock);
  ASSERT_EQ(second.turns.size(), first.turns.size());
  for (size_t i = 0; i < first.turns.size(); ++i) {
    EXPECT_TRUE(second.turns[i].shared);
    EXPECT_EQ(second.turns[i].answer.tokens, first.turns[i].answer.tokens) << "agent " << i;
  }
}

// Chat sharing across servers: a message's master kept on one engine (its context, with the message as
// a segment) publishes a segment index record; a second engine (another server) whose request holds
// the message after another system prompt finds no master in its RAM, fetches the record, rebuilds
// the master (its full blocks restored from Redis, the partial last block computed) and blends the
// message from it. Its answer is the first engine's to the same request, token for token: the master
// KV is bit-identical. A corrupted record is rejected and deleted, and the message prefilled instead.
TEST_P(KvRedisTierModelTest, AChatMasterKeptOnOneEngineIsFetchedByAnother) {
  const LoadedModel& lm = real_model(GetParam());
  const Tokenizer& tok = *lm.tokenizer;
  ThreadPool pool(0);
  const EngineOptions eo = redis_engine_options();
  const std::vector<int32_t> message = tok.encode(genesis_prompts(1, 700, 700, 577)[0], false, false);
  const std::vector<int32_t> tail = tok.encode("\nIn one sentence:", false, false);
  struct Chat {
    RequestParams params;
    std::vector<std::pair<int64_t, int64_t>> segments;
  };
  auto chat_for = [&](const char* who) {
    Chat c;
    c.params = greedy_request(lm, std::string("You are ") + who + ". Read the chat and answer:\n", 6);
    const int64_t start = int64_t(c.params.prompt.size());
    c.params.prompt.insert(c.params.prompt.end(), message.begin(), message.end());
    c.segments = {{start, start + int64_t(message.size())}};
    c.params.prompt.insert(c.params.prompt.end(), tail.begin(), tail.end());
    return c;
  };
  struct Answer {
    std::vector<int32_t> tokens;
    ChatSharingReport report;
    std::string error;
  };
  auto run_chat = [&](Engine& e, const Chat& c) {
    ChatSharingRequest req;
    req.params = c.params;
    req.segments = c.segments;
    req.recompute = 0.15;
    req.request_id = e.next_request_id();
    Answer out;
    start_chat_request(e, std::move(req), [&](const RequestEvent& ev, const ChatSharingReport& r) {
      if (ev.has_token && !ev.eog) out.tokens.push_back(ev.token);
      if (ev.request_finished) {
        out.report = r;
        out.error = ev.error;
      }
    });
    EXPECT_TRUE(e.run_until_idle().ok());
    EXPECT_EQ(out.error, "");
    return out;
  };
  const Chat ada = chat_for("Ada, a baker"), bram = chat_for("Bram, a smith");
  Answer on_first;
  {
    auto engine = Engine::create(lm, eo, pool);
    ASSERT_TRUE(engine.ok()) << engine.error();
    const Answer made = run_chat(**engine, ada);  // computes the message: its context becomes the master
    EXPECT_EQ(made.report.fetched_masters, 0);
    on_first = run_chat(**engine, bram);
    EXPECT_EQ(on_first.report.mode, "tokendance");
    EXPECT_EQ(on_first.report.segments, 1);
    EXPECT_EQ(on_first.report.fetched_masters, 0) << "the master was in this engine's RAM";
    ASSERT_TRUE((*engine)->kv().flush_shared_tiers(std::chrono::seconds(30)));
    ASSERT_TRUE((*engine)->kv().redis_tier()->flush_segments_for(std::chrono::seconds(30)));
    EXPECT_EQ((*engine)->metrics().redis_segments.writes, 1u) << "one record: the second context's segment was known";
  }
  {
    // A record that fails a check is a miss: deleted, never used, and the message prefilled.
    auto probe = Engine::create(lm, eo, pool);
    ASSERT_TRUE(probe.ok()) << probe.error();
    RedisTier& tier = *(*probe)->kv().redis_tier();
    const std::string key = tier.segment_key_of(segment_key(message));
    const auto good = redis.command({"GET", key});
    ASSERT_TRUE(good && good->type == REDIS_REPLY_STRING);
    const std::string kept(good->str, good->len);
    std::string bad = kept;
    bad[bad.size() / 2] ^= 0x20;
    ASSERT_TRUE(redis.command({"SET", key, bad}));
    const Answer prefilled = run_chat(**probe, chat_for("Dov, a farmer"));
    EXPECT_EQ(prefilled.report.fetched_masters, 0);
    EXPECT_EQ(prefilled.report.segments, 0) << "no master: the message is prefilled";
    EXPECT_EQ((*probe)->metrics().redis_segments.rejected, 1u);
    ASSERT_TRUE(tier.flush_segments_for(std::chrono::seconds(30)));  // its own record, written once the key was free
    ASSERT_TRUE(redis.command({"SET", key, kept}));                  // the first engine's again
  }
  auto engine = Engine::create(lm, eo, pool);  // the second server: nothing of the chat in its RAM
  ASSERT_TRUE(engine.ok()) << engine.error();
  const Answer fetched = run_chat(**engine, bram);
  const ChatSharingReport& r = fetched.report;
  EXPECT_EQ(r.mode, "tokendance");
  EXPECT_EQ(r.segments, 1) << "the message blended from the fetched master, not prefilled";
  EXPECT_EQ(r.fetched_masters, 1);
  const int64_t master_tokens = ada.segments[0].second;  // [Ada's system prompt][the message]
  const int64_t restorable = (master_tokens - 1) / kRedisModelBlock * kRedisModelBlock;
  EXPECT_EQ(r.master_tokens_restored, restorable) << "every full block of the master restored from Redis";
  EXPECT_EQ(r.master_tokens_computed, master_tokens - restorable);
  std::printf("[ %s ] master of %lld tokens: %lld restored, %lld computed; %lld blended, %lld recomputed\n",
              GetParam().c_str(), (long long)master_tokens, (long long)r.master_tokens_restored,
              (long long)r.master_tokens_computed, (long long)r.segment_tokens, (long long)r.recomputed_tokens);
  const EngineMetrics m = (*engine)->metrics();
  EXPECT_EQ(m.redis_segments.hits, 1u);
  EXPECT_EQ(m.redis_segments.rejected, 0u);
  EXPECT_GE(int64_t(m.redis_tier.hits), restorable / kRedisModelBlock);
  EXPECT_EQ(fetched.tokens, on_first.tokens) << "the blend from a fetched master answers as from the local one";
  // The master stays in this engine's segment store: the next request finds it in RAM.
  const Answer again = run_chat(**engine, chat_for("Cleo, a teacher"));
  EXPECT_EQ(again.report.fetched_masters, 0);
  EXPECT_EQ(again.report.segments, 1);
}

INSTANTIATE_TEST_SUITE_P(BothModels, KvRedisTierModelTest, ::testing::Values("smollm2", "gemma3"));

}  // namespace
}  // namespace agentkv
