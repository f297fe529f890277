// The scheduler with no model: token budget, chunked prefill, decode-first order, admission control,
// preemption of the latest arrival, prefix hits on admission. The "forward pass" is simulated by
// committing the scheduled tokens; a "sampled" token is appended by hand.
#include <gtest/gtest.h>

#include <numeric>

#include "engine/scheduler.h"

namespace agentkv {
namespace {

ModelConfig tiny_config() {
  ModelConfig c;
  c.arch = "llama";
  c.n_layer = 1;
  c.n_head = 1;
  c.n_head_kv = 1;
  c.head_dim = 4;
  c.n_embd = 4;
  c.n_vocab = 100;
  c.n_ctx_train = 1024;
  return c;
}

struct SchedulerFixture {
  explicit SchedulerFixture(int64_t n_blocks, bool prefix = true, int block_size = 4) {
    KvManagerOptions o;
    o.block_size = block_size;
    o.prefix_caching = prefix;
    o.mem_bytes = n_blocks * KvArena::bytes_per_block(cfg, block_size);
    auto m = KvManager::create(cfg, 7, o);
    EXPECT_TRUE(m.ok()) << m.error();
    kv = std::move(*m);
  }
  std::unique_ptr<Sequence> seq(int n_prompt, uint64_t arrival, int first_token = 0) {
    auto s = std::make_unique<Sequence>(*kv, 0);
    s->tokens.resize(size_t(n_prompt));
    std::iota(s->tokens.begin(), s->tokens.end(), first_token);
    s->n_prompt = n_prompt;
    s->arrival = arrival;
    return s;
  }
  // The forward pass wrote the chunks' K/V; sequences whose chunk wanted logits "sample" a token.
  static void run(const std::vector<ScheduledChunk>& chunks, int32_t sampled = 99) {
    for (const ScheduledChunk& c : chunks) {
      c.seq->kv.commit(std::span<const int32_t>(c.seq->tokens).subspan(size_t(c.start), size_t(c.n)));
      if (c.wants_logits) c.seq->tokens.push_back(sampled);
    }
  }
  ModelConfig cfg = tiny_config();
  std::unique_ptr<KvManager> kv;
};

TEST(SchedulerTest, ChunkedPrefillUnderTokenBudget) {
  SchedulerFixture f(16);
  Scheduler s(*f.kv, SchedulerOptions{8, 4});
  auto a = f.seq(10, 0);
  s.add_waiting(a.get());
  auto c1 = s.schedule();
  ASSERT_EQ(c1.size(), 1u);
  EXPECT_EQ(c1[0].start, 0);
  EXPECT_EQ(c1[0].n, 8);
  EXPECT_FALSE(c1[0].wants_logits);
  EXPECT_EQ(a->kv.blocks(), (std::vector<int32_t>{0, 1}));
  SchedulerFixture::run(c1);
  auto c2 = s.schedule();
  ASSERT_EQ(c2.size(), 1u);
  EXPECT_EQ(c2[0].start, 8);
  EXPECT_EQ(c2[0].n, 2);
  EXPECT_TRUE(c2[0].wants_logits);
  EXPECT_EQ(a->kv.blocks(), (std::vector<int32_t>{0, 1, 2}));
  SchedulerFixture::run(c2);
  auto c3 = s.schedule();  // decode: one token
  ASSERT_EQ(c3.size(), 1u);
  EXPECT_EQ(c3[0].start, 10);
  EXPECT_EQ(c3[0].n, 1);
  EXPECT_TRUE(c3[0].wants_logits);
}

TEST(SchedulerTest, DecodeTokensGoFirstThenPrefillChunksShareTheStep) {
  SchedulerFixture f(32);
  Scheduler s(*f.kv, SchedulerOptions{6, 4});
  auto a = f.seq(3, 0);
  s.add_waiting(a.get());
  SchedulerFixture::run(s.schedule());  // a prefilled, sampled one token
  auto b = f.seq(20, 1, 50);
  s.add_waiting(b.get());
  auto c = s.schedule();
  ASSERT_EQ(c.size(), 2u);
  EXPECT_EQ(c[0].seq, a.get());  // decode first
  EXPECT_EQ(c[0].n, 1);
  EXPECT_EQ(c[1].seq, b.get());  // then as much prefill as the budget leaves
  EXPECT_EQ(c[1].n, 5);
  EXPECT_EQ(s.n_running(), 2u);
}

TEST(SchedulerTest, AdmissionWaitsForBlocks) {
  SchedulerFixture f(3);
  Scheduler s(*f.kv, SchedulerOptions{64, 8});
  auto a = f.seq(8, 0);  // 2 blocks
  auto b = f.seq(8, 1);  // 2 more: only 1 left
  s.add_waiting(a.get());
  s.add_waiting(b.get());
  auto c = s.schedule();
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].seq, a.get());
  EXPECT_EQ(s.n_waiting(), 1u);
  EXPECT_EQ(b->kv.blocks().size(), 0u);
  SchedulerFixture::run(c);
  s.remove(a.get());  // finished: blocks back at once
  EXPECT_EQ(f.kv->pool().num_free(), 3);
  auto c2 = s.schedule();
  ASSERT_EQ(c2.size(), 1u);
  EXPECT_EQ(c2[0].seq, b.get());
}

TEST(SchedulerTest, ReclaimsHeldBlocksBeforeRefusingOrPreempting) {
  // Blocks held outside the scheduler (the segment cache's contexts) are given back first: a waiting
  // sequence is admitted and a running one is not preempted while something can be reclaimed.
  SchedulerFixture f(7);
  std::vector<std::unique_ptr<KvSequence>> held;
  for (int i = 0; i < 3; ++i) {
    held.push_back(std::make_unique<KvSequence>(*f.kv));
    ASSERT_TRUE(held.back()->reserve(4));
  }
  int reclaimed = 0;
  Scheduler s(*f.kv, SchedulerOptions{64, 8});
  s.set_reclaim([&] {
    if (held.empty()) return false;
    held.pop_back();
    ++reclaimed;
    return true;
  });
  auto a = f.seq(8, 0);   // 2 blocks of the 4 free
  auto b = f.seq(12, 1);  // 3 more: only after a reclaim
  s.add_waiting(a.get());
  s.add_waiting(b.get());
  auto c = s.schedule();
  EXPECT_EQ(c.size(), 2u);
  EXPECT_EQ(reclaimed, 1);
  SchedulerFixture::run(c);
  // a's and b's next tokens need one more block each and none is free: two reclaims, no preemption.
  auto c2 = s.schedule();
  EXPECT_EQ(reclaimed, 3);
  EXPECT_EQ(s.stats().preemptions, 0u);
  EXPECT_EQ(c2.size(), 2u);
}

TEST(SchedulerTest, PreemptsTheLatestArrivalAndResumesIt) {
  SchedulerFixture f(4, /*prefix=*/false);
  Scheduler s(*f.kv, SchedulerOptions{64, 8});
  auto a = f.seq(3, 0);
  auto b = f.seq(3, 1, 10);
  s.add_waiting(a.get());
  s.add_waiting(b.get());
  SchedulerFixture::run(s.schedule());  // both prefilled (one block each), each sampled a token
  EXPECT_EQ(a->kv.blocks(), (std::vector<int32_t>{0}));
  EXPECT_EQ(b->kv.blocks(), (std::vector<int32_t>{1}));
  SchedulerFixture::run(s.schedule());  // slot 3: still the first block
  SchedulerFixture::run(s.schedule());  // slot 4: a second block each -> pool full
  EXPECT_EQ(a->kv.blocks(), (std::vector<int32_t>{0, 2}));
  EXPECT_EQ(b->kv.blocks(), (std::vector<int32_t>{1, 3}));
  EXPECT_EQ(f.kv->pool().num_free(), 0);
  SchedulerFixture::run(s.schedule());  // slots 5, 6, 7 fit
  SchedulerFixture::run(s.schedule());
  SchedulerFixture::run(s.schedule());
  // Slot 8 needs a third block for each: b (the later arrival) is preempted and a goes on.
  auto c = s.schedule();
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].seq, a.get());
  EXPECT_EQ(s.stats().preemptions, 1u);
  EXPECT_EQ(b->n_preemptions, 1);
  EXPECT_EQ(b->kv.n_tokens(), 0);
  EXPECT_EQ(b->state, Sequence::State::kWaiting);
  EXPECT_EQ(a->kv.blocks(), (std::vector<int32_t>{0, 2, 3}));  // b released tail first (3, then 1): 3 is the LRU head
  EXPECT_EQ(b->tokens.size(), 9u);  // prompt + 6 sampled tokens are kept for the recompute
  SchedulerFixture::run(c);
  s.remove(a.get());
  // b recomputes all 8 known tokens + the last sampled one in one chunk.
  auto r = s.schedule();
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].seq, b.get());
  EXPECT_EQ(r[0].start, 0);
  EXPECT_EQ(r[0].n, 9);
  EXPECT_TRUE(r[0].wants_logits);
}

TEST(SchedulerTest, AdmissionReusesCachedPrefixBlocks) {
  SchedulerFixture f(16);
  Scheduler s(*f.kv, SchedulerOptions{64, 8});
  auto a = f.seq(9, 0);
  s.add_waiting(a.get());
  SchedulerFixture::run(s.schedule());
  s.remove(a.get());  // blocks 0, 1 stay cached after release
  auto b = f.seq(11, 1);  // same first 9 tokens, two more
  s.add_waiting(b.get());
  auto c = s.schedule();
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].start, 8);  // two full blocks reused
  EXPECT_EQ(c[0].n, 3);
  EXPECT_EQ(b->kv.blocks()[0], 0);
  EXPECT_EQ(b->kv.blocks()[1], 1);
  EXPECT_EQ(b->n_cached_prompt, 8);
  EXPECT_EQ(s.stats().prefix_hit_tokens, 8u);
  EXPECT_EQ(s.stats().prefix_query_tokens, 9u + 11u);
}

}  // namespace
}  // namespace agentkv
