// The paged engine on the real models: batching, prefix caching, preemption and forks must not
// change what a sequence generates.
//
// Bound: zero. The engine runs the model in batch-invariant mode (ops/matmul.h): generated tokens
// always take the decode kernels and prompt tokens the prefill kernels, and every other op works per
// token, so a token's logits are bit-identical however it was batched, chunked, cached or resumed.
// (Without that mode, 5 of 16 SmolLM2 prompts diverged within 12 greedy tokens.) Greedy tokens must
// be identical and the logprobs (log-softmax of the logits) of the chosen and top tokens equal.
#include <thread>

#include "engine/engine_loop.h"
#include "engine_test_util.h"

namespace agentkv {
namespace {

using testing::expect_same_outputs;
using testing::genesis_prompts;
using testing::greedy_request;
using testing::real_model;
using testing::RequestOut;
using testing::run_engine;

constexpr float kLogprobBound = 0.0f;

EngineOptions options(int64_t mem_bytes = int64_t(512) << 20, bool prefix = true, int block_size = 16) {
  EngineOptions eo;
  eo.kv.mem_bytes = mem_bytes;
  eo.kv.prefix_caching = prefix;
  eo.kv.block_size = block_size;
  return eo;
}

class EngineModelTest : public ::testing::TestWithParam<std::string> {};

TEST_P(EngineModelTest, BatchedEqualsOneAtATime) {
  const LoadedModel& lm = real_model(GetParam());
  ThreadPool pool(0);
  std::vector<RequestParams> reqs;
  for (auto& p : genesis_prompts(16, 40, 600)) reqs.push_back(greedy_request(lm, p, 12));
  const auto alone = run_engine(lm, pool, options(), reqs, true);
  EngineMetrics m;
  const auto batched = run_engine(lm, pool, options(), reqs, false, &m);
  const float worst = expect_same_outputs(batched, alone, kLogprobBound, "batched vs alone");
  RecordProperty("max_logprob_delta", std::to_string(worst));
  EXPECT_GT(m.steps, 0u);
  EXPECT_LT(m.steps, 16u * 12u) << "requests were not batched";
}

TEST_P(EngineModelTest, PrefixCachingOnEqualsOff) {
  const LoadedModel& lm = real_model(GetParam());
  ThreadPool pool(0);
  // Four prompts sharing a long prefix: with caching on, the later three reuse its blocks.
  const std::string shared = genesis_prompts(1, 900, 900)[0];
  const auto tails = genesis_prompts(4, 60, 200, 4001);
  std::vector<RequestParams> reqs;
  for (auto& t : tails) reqs.push_back(greedy_request(lm, shared + " " + t, 10));
  EngineMetrics off_m, on_m;
  const auto off = run_engine(lm, pool, options(int64_t(512) << 20, false), reqs, true, &off_m);
  const auto on = run_engine(lm, pool, options(int64_t(512) << 20, true), reqs, true, &on_m);
  expect_same_outputs(on, off, kLogprobBound, "prefix caching on vs off");
  const int64_t shared_tokens = int64_t(lm.tokenizer->encode(shared, lm.tokenizer->add_bos_default(), false).size());
  EXPECT_EQ(off_m.prefix_hit_tokens, 0u);
  // Each later request reuses at least the full blocks of the shared prefix (the tail may start
  // mid-token, so the last partial block and one boundary token are not counted).
  EXPECT_GE(int64_t(on_m.prefix_hit_tokens), 3 * ((shared_tokens - 1) / 16 - 1) * 16);
  EXPECT_EQ(on[0][0].n_cached, 0);
  for (size_t i = 1; i < on.size(); ++i) EXPECT_GT(on[i][0].n_cached, 0) << "request " << i;
  EXPECT_LT(on_m.tokens_prefilled, off_m.tokens_prefilled);
}

TEST_P(EngineModelTest, PreemptedAndResumedEqualsUninterrupted) {
  const LoadedModel& lm = real_model(GetParam());
  ThreadPool pool(0);
  std::vector<RequestParams> reqs;
  for (auto& p : genesis_prompts(4, 300, 420)) reqs.push_back(greedy_request(lm, p, 40));
  int64_t longest = 0;
  for (auto& r : reqs) longest = std::max<int64_t>(longest, int64_t(r.prompt.size()) + r.max_tokens);
  const int bs = 16;
  // Room for the longest request and a bit: the others must be preempted to let it grow.
  const int64_t blocks = (longest + bs - 1) / bs + 4;
  const int64_t bpb = KvArena::bytes_per_block(lm.config(), bs);
  EngineMetrics small_m;
  const auto full = run_engine(lm, pool, options(), reqs, false);
  const auto small = run_engine(lm, pool, options(blocks * bpb, false), reqs, false, &small_m);
  EXPECT_GT(small_m.preemptions, 0u) << "the budget was meant to force preemption";
  EXPECT_LE(small_m.blocks_peak_used, blocks);
  expect_same_outputs(small, full, kLogprobBound, "preempted vs uninterrupted");
}

TEST_P(EngineModelTest, ForkSharesThePromptAndMatchesSingleSamples) {
  const LoadedModel& lm = real_model(GetParam());
  ThreadPool pool(0);
  const std::string prompt = genesis_prompts(1, 500, 500)[0];
  // Greedy n = 3: three identical copies of the n = 1 result.
  RequestParams one = greedy_request(lm, prompt, 12);
  RequestParams three = one;
  three.n = 3;
  EngineMetrics m1, m3;
  const auto single = run_engine(lm, pool, options(), {one}, false, &m1);
  const auto forked = run_engine(lm, pool, options(), {three}, false, &m3);
  ASSERT_EQ(forked[0].size(), 3u);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(forked[0][i].tokens, single[0][0].tokens) << "sample " << i;
  // The prompt was prefilled once, and its full blocks are shared, not copied.
  EXPECT_EQ(m3.tokens_prefilled, m1.tokens_prefilled);
  const int64_t prompt_blocks = int64_t(one.prompt.size()) / 16;
  EXPECT_LT(m3.blocks_peak_used, 3 * prompt_blocks);
  // Seeded sampling: sample i of an n = 3 request equals an n = 1 request with seed + i.
  RequestParams t3 = three;
  t3.sampling.temperature = 0.9f;
  t3.sampling.seed = 1234;
  const auto sampled = run_engine(lm, pool, options(), {t3}, false);
  for (int i = 0; i < 3; ++i) {
    RequestParams t1 = t3;
    t1.n = 1;
    t1.sampling.seed = 1234 + uint64_t(i);
    const auto alone = run_engine(lm, pool, options(), {t1}, false);
    EXPECT_EQ(sampled[0][size_t(i)].tokens, alone[0][0].tokens) << "sample " << i;
  }
}

TEST_P(EngineModelTest, CancelFreesBlocksAtOnce) {
  const LoadedModel& lm = real_model(GetParam());
  ThreadPool pool(0);
  auto engine = Engine::create(lm, options(), pool);
  ASSERT_TRUE(engine.ok());
  Engine& e = **engine;
  const auto prompts = genesis_prompts(2, 300, 300);
  RequestOut a, b;
  bool a_done = false, b_done = false;
  auto ida = e.add_request(greedy_request(lm, prompts[0], 50), testing::collect_into(&a, &a_done));
  auto idb = e.add_request(greedy_request(lm, prompts[1], 50), testing::collect_into(&b, &b_done));
  ASSERT_TRUE(ida.ok() && idb.ok());
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(e.step().ok());
  const int64_t used_both = e.metrics().blocks_used;
  e.cancel(*ida);
  EXPECT_TRUE(a_done);
  EXPECT_EQ(a[0].finish, "cancelled");
  const int64_t used_after = e.metrics().blocks_used;
  EXPECT_LT(used_after, used_both);
  EXPECT_EQ(used_after, int64_t(e.kv().pool().stats().n_used));
  ASSERT_TRUE(e.run_until_idle().ok());
  EXPECT_TRUE(b_done);
  EXPECT_EQ(b[0].finish, "length");
  EXPECT_EQ(e.metrics().blocks_used, 0);
  EXPECT_EQ(e.metrics().requests_cancelled, 1u);
}

// Agents keep their context resident as a retained snapshot and resume from it; with prefix caching
// off, the snapshot is the only reuse, so hits are exact and outputs must equal a fresh run.
TEST_P(EngineModelTest, RetainedSnapshotResumesExactly) {
  const LoadedModel& lm = real_model(GetParam());
  ThreadPool pool(0);
  auto engine = Engine::create(lm, options(int64_t(512) << 20, false), pool);
  ASSERT_TRUE(engine.ok());
  Engine& e = **engine;
  const auto texts = genesis_prompts(2, 400, 400);
  RequestParams a = greedy_request(lm, texts[0], 10);
  a.retain_kv = true;
  uint64_t handle = 0;
  int64_t snap_tokens = 0;
  std::vector<int32_t> gen;
  bool a_done = false;
  ASSERT_TRUE(e.add_request(a, [&](const RequestEvent& ev) {
                 if (ev.has_token) gen.push_back(ev.token);
                 if (ev.request_finished) {
                   a_done = true;
                   handle = ev.retained_kv;
                   snap_tokens = ev.retained_tokens;
                 }
               }).ok());
  ASSERT_TRUE(e.run_until_idle().ok());
  ASSERT_TRUE(a_done);
  ASSERT_NE(handle, 0u);
  ASSERT_EQ(gen.size(), 10u);
  // The last sampled token has no K/V yet.
  EXPECT_EQ(snap_tokens, int64_t(a.prompt.size()) + 9);
  ASSERT_NE(e.retained(handle), nullptr);
  EXPECT_EQ(e.metrics().retained_snapshots, 1);
  EXPECT_GT(e.metrics().blocks_used, 0) << "a retained snapshot keeps its blocks";

  const std::vector<int32_t> tail = lm.tokenizer->encode(" " + texts[1], false, false);
  // B continues A's conversation; C diverges from A's prompt inside a full block.
  RequestParams b = greedy_request(lm, "", 8);
  b.prompt = a.prompt;
  b.prompt.insert(b.prompt.end(), gen.begin(), gen.end());
  b.prompt.insert(b.prompt.end(), tail.begin(), tail.end());
  RequestParams c = greedy_request(lm, "", 8);
  const size_t cut = 16 * 5 + 7;
  c.prompt.assign(a.prompt.begin(), a.prompt.begin() + cut);
  c.prompt.insert(c.prompt.end(), tail.begin(), tail.end());
  const auto fresh = run_engine(lm, pool, options(int64_t(512) << 20, false), {b, c}, true);

  const uint64_t forked = e.fork_retained(handle);
  ASSERT_NE(forked, 0u);
  e.release_retained(handle);  // the fork keeps the blocks alive
  b.kv_from = forked;
  c.kv_from = forked;
  const auto resumed = [&] {
    std::vector<RequestOut> outs(2);
    bool done[2] = {false, false};
    EXPECT_TRUE(e.add_request(b, testing::collect_into(&outs[0], &done[0])).ok());
    EXPECT_TRUE(e.add_request(c, testing::collect_into(&outs[1], &done[1])).ok());
    EXPECT_TRUE(e.run_until_idle().ok());
    EXPECT_TRUE(done[0] && done[1]);
    return outs;
  }();
  // C reuses prompt tokens only: bit-identical to fresh. B also reuses A's generated tokens, whose
  // K/V the decode kernels computed, while the fresh run computes them as prompt tokens with the
  // prefill kernels; their rounding differs (measured on the first token's logprob: 0.16 nats on
  // SmolLM2, 0.04 on Gemma 3), so B's values are checked below against a snapshot of the same
  // context made by prefill, where they must be bit-identical.
  expect_same_outputs({resumed[1]}, {fresh[1]}, kLogprobBound, "resumed from a snapshot vs fresh");
  ASSERT_EQ(resumed[0][0].tokens.size(), 8u);
  EXPECT_EQ(resumed[0][0].n_cached, snap_tokens);
  // A cut inside a full block keeps the block's first rows (it is copied before C writes into it).
  EXPECT_EQ(resumed[1][0].n_cached, int64_t(cut)) << "a cut inside a full block keeps its first rows";

  // The same context prefilled as a prompt (max_tokens 0: prefill only) and retained: then every
  // reused K/V came from the prefill kernels, and B resumed from it is bit-identical to fresh.
  RequestParams warm = greedy_request(lm, "", 0);
  warm.prompt.assign(b.prompt.begin(), b.prompt.begin() + snap_tokens);
  warm.retain_kv = true;
  uint64_t warm_handle = 0;
  ASSERT_TRUE(e.add_request(warm, [&](const RequestEvent& ev) {
                 EXPECT_FALSE(ev.has_token);
                 if (ev.request_finished) warm_handle = ev.retained_kv;
               }).ok());
  ASSERT_TRUE(e.run_until_idle().ok());
  ASSERT_NE(warm_handle, 0u);
  EXPECT_EQ(e.retained(warm_handle)->n_tokens(), snap_tokens);
  b.kv_from = warm_handle;
  std::vector<RequestOut> from_warm(1);
  bool warm_done = false;
  ASSERT_TRUE(e.add_request(b, testing::collect_into(&from_warm[0], &warm_done)).ok());
  ASSERT_TRUE(e.run_until_idle().ok());
  expect_same_outputs(from_warm, {fresh[0]}, kLogprobBound, "resumed from a prefilled snapshot vs fresh");
  EXPECT_EQ(from_warm[0][0].n_cached, snap_tokens);
  e.release_retained(warm_handle);

  RequestParams bad = b;
  bad.kv_from = handle;  // released
  EXPECT_FALSE(e.add_request(bad, nullptr).ok());
  e.release_retained(forked);
  EXPECT_EQ(e.metrics().retained_snapshots, 0);
  EXPECT_EQ(e.metrics().blocks_used, 0) << "releasing the last snapshot frees its blocks";
}

TEST_P(EngineModelTest, ForcedHashCollisionsAreNotReused) {
  const LoadedModel& lm = real_model(GetParam());
  ThreadPool pool(0);
  std::vector<RequestParams> reqs;
  for (auto& p : genesis_prompts(3, 300, 400)) reqs.push_back(greedy_request(lm, p, 6));
  reqs.push_back(reqs[0]);  // an exact repeat must still hit its first block, which verifies
  EngineOptions colliding = options();
  colliding.kv.hash = [](uint64_t, std::span<const int32_t>, uint64_t, uint64_t) -> uint64_t { return 42; };
  EngineMetrics m;
  const auto off = run_engine(lm, pool, options(int64_t(512) << 20, false), reqs, true);
  const auto coll = run_engine(lm, pool, colliding, reqs, true, &m);
  for (size_t i = 0; i < reqs.size(); ++i) EXPECT_EQ(coll[i][0].tokens, off[i][0].tokens) << "request " << i;
  EXPECT_GT(m.prefix_query_blocks, m.prefix_hit_blocks);
  EXPECT_LE(m.prefix_hit_tokens, 16u);  // only the repeat's first block matches hash and tokens
}

TEST_P(EngineModelTest, EngineLoopServesConcurrentClients) {
  const LoadedModel& lm = real_model(GetParam());
  ThreadPool pool(0);
  std::vector<RequestParams> reqs;
  for (auto& p : genesis_prompts(8, 80, 300)) reqs.push_back(greedy_request(lm, p, 8));
  const auto alone = run_engine(lm, pool, options(), reqs, true);
  auto engine = Engine::create(lm, options(), pool);
  ASSERT_TRUE(engine.ok());
  std::vector<RequestOut> outs(reqs.size());
  {
    EngineLoop loop(**engine);
    std::vector<std::thread> clients;
    for (size_t i = 0; i < reqs.size(); ++i) {
      clients.emplace_back([&, i] {
        std::mutex mu;
        std::condition_variable cv;
        bool done = false;
        RequestOut local;
        bool finished = false;
        auto cb = testing::collect_into(&local, &finished);
        auto id = loop.submit(reqs[i], [&](const RequestEvent& ev) {
          std::lock_guard<std::mutex> lock(mu);
          cb(ev);
          if (ev.request_finished) {
            done = true;
            cv.notify_one();
          }
        });
        ASSERT_TRUE(id.ok());
        std::unique_lock<std::mutex> lock(mu);
        cv.wait(lock, [&] { return done; });
        outs[i] = local;
      });
    }
    for (auto& t : clients) t.join();
    // The snapshot is refreshed before each final event is handed over, so a client that has all
    // its answers sees nothing left running at once (the server's /metrics relies on it).
    EXPECT_EQ(loop.metrics().blocks_used, 0);
    EXPECT_EQ(loop.metrics().requests_running, 0);
    RequestParams bad = reqs[0];
    bad.prompt.push_back(lm.config().n_vocab);  // out of range: rejected on the caller's thread
    EXPECT_FALSE(loop.submit(bad, {}).ok());
  }
  expect_same_outputs(outs, alone, kLogprobBound, "engine thread vs alone");
}

INSTANTIATE_TEST_SUITE_P(BothModels, EngineModelTest, ::testing::Values("smollm2", "gemma3"));

// Errors carry the code the server maps to a status (server/error_status.h): a bad token 400, a
// prompt over the context 413, a request the KV budget cannot hold 507, a request during shutdown 503.
TEST(EngineErrorCodes, SetWhereTheErrorArises) {
  const LoadedModel& lm = real_model("smollm2");
  ThreadPool pool(0);
  auto engine = Engine::create(lm, options(int64_t(1) << 20), pool);
  ASSERT_TRUE(engine.ok()) << engine.error();
  RequestParams p = greedy_request(lm, genesis_prompts(1, 80, 300)[0], 8);
  RequestParams bad = p;
  bad.prompt.push_back(lm.config().n_vocab);
  EXPECT_EQ((*engine)->validate(bad).code(), ErrorCode::kInvalidArgument);
  RequestParams long_prompt = p;
  long_prompt.prompt.assign(size_t((*engine)->n_ctx()), p.prompt[0]);
  EXPECT_EQ((*engine)->validate(long_prompt).code(), ErrorCode::kTooLarge);
  RequestParams over_budget = p;
  over_budget.max_tokens = 2000;
  EXPECT_EQ((*engine)->validate(over_budget).code(), ErrorCode::kResourceExhausted)
      << (*engine)->validate(over_budget).error();
  EngineLoop loop(**engine);
  loop.shutdown(false);
  auto late = loop.submit(p, {});
  ASSERT_FALSE(late.ok());
  EXPECT_EQ(late.code(), ErrorCode::kUnavailable) << late.error();
}

// 500 sequences at once under a KV budget far smaller than they need together: all finish, the
// manager's own accounting never exceeds the budget, and nothing stays referenced.
TEST(EngineStressTest, FiveHundredSequencesUnderSmallBudget) {
  const LoadedModel& lm = real_model("smollm2");
  ThreadPool pool(0);
  std::vector<RequestParams> reqs;
  for (auto& p : genesis_prompts(500, 30, 120, 313)) {
    RequestParams r = greedy_request(lm, p, 6, -1);
    r.ignore_eos = false;
    reqs.push_back(std::move(r));
  }
  const int64_t blocks = 96;
  const int64_t bpb = KvArena::bytes_per_block(lm.config(), 16);
  EngineOptions eo = options(blocks * bpb, true);
  eo.scheduler.max_batch_tokens = 256;
  EngineMetrics m;
  const auto outs = run_engine(lm, pool, eo, reqs, false, &m);
  ASSERT_EQ(outs.size(), 500u);
  for (size_t i = 0; i < outs.size(); ++i) {
    ASSERT_EQ(outs[i].size(), 1u);
    EXPECT_TRUE(outs[i][0].finish == "length" || outs[i][0].finish == "stop") << i << ": " << outs[i][0].finish;
  }
  EXPECT_EQ(m.blocks_total, blocks);
  EXPECT_LE(m.blocks_peak_used, blocks);
  EXPECT_EQ(m.blocks_used, 0);
  EXPECT_EQ(m.requests_finished, 500u);
  EXPECT_EQ(m.requests_failed, 0u);
  EXPECT_EQ(m.requests_added, 500u);
}

}  // namespace
}  // namespace agentkv
