// compare_continuation on the real models: an identical context scores exactly zero, and a context
// whose K/V was disturbed scores a positive KL that grows with the disturbance.
#include "share/continuation_quality.h"

#include "engine_test_util.h"

namespace agentkv {
namespace {

using testing::genesis_prompts;
using testing::real_model;

class ContinuationQualityTest : public ::testing::TestWithParam<std::string> {};

// Prefills text as a retained snapshot (prompt tokens only: the prefill kernels computed every K/V).
uint64_t prefill_snapshot(Engine& e, const std::vector<int32_t>& prompt) {
  RequestParams p;
  p.prompt = prompt;
  p.max_tokens = 0;
  p.retain_kv = true;
  uint64_t h = 0;
  EXPECT_TRUE(e.add_request(p, [&](const RequestEvent& ev) {
                 if (ev.request_finished) h = ev.retained_kv;
               }).ok());
  EXPECT_TRUE(e.run_until_idle().ok());
  return h;
}

// Scales the V rows of context tokens [first, first + n) in every layer.
void disturb(const KvManager& kv, const KvSequence& s, int64_t first, int64_t n, float scale) {
  const KvArena& a = kv.arena();
  std::vector<float> row(size_t(a.kv_dim()));
  for (int64_t t = first; t < first + n; ++t)
    for (int l = 0; l < a.n_layer(); ++l) {
      kv_t* v = a.layer(l).v(s.blocks()[size_t(t / a.block_size())], int(t % a.block_size()));
      kv_load(row.data(), v, a.kv_dim());
      for (float& x : row) x *= scale;
      kv_store(v, row.data(), a.kv_dim());
    }
}

TEST_P(ContinuationQualityTest, IdenticalIsZeroAndDisturbedIsPositive) {
  const LoadedModel& lm = real_model(GetParam());
  ThreadPool pool(0);
  EngineOptions eo;
  eo.kv.mem_bytes = int64_t(256) << 20;
  eo.kv.prefix_caching = false;  // the two snapshots must not share blocks
  auto engine = Engine::create(lm, eo, pool);
  ASSERT_TRUE(engine.ok());
  Engine& e = **engine;
  const auto texts = genesis_prompts(2, 600, 600);
  const std::vector<int32_t> ctx = lm.tokenizer->encode(texts[0], lm.tokenizer->add_bos_default(), false);
  std::string cont_text(" ");  // (GCC 12 warns falsely about " " + std::string)
  cont_text.append(texts[1], 0, 200);
  const std::vector<int32_t> cont = lm.tokenizer->encode(cont_text, false, false);
  const uint64_t ha = prefill_snapshot(e, ctx), hb = prefill_snapshot(e, ctx);
  ASSERT_TRUE(ha && hb);
  const KvSequence& a = *e.retained(ha);
  const KvSequence& b = *e.retained(hb);
  const int64_t used_before = e.kv().pool().stats().n_used;

  auto same = compare_continuation(*lm.model, e.kv(), a, b, cont, pool);
  ASSERT_TRUE(same.ok()) << same.error();
  EXPECT_EQ(same->n_positions, int(cont.size()));
  EXPECT_EQ(same->max_kl, 0.0);
  EXPECT_EQ(same->top1_agreement, 1.0);
  EXPECT_EQ(same->first_disagreement, -1);
  EXPECT_EQ(same->nll_exact, same->nll_approx);
  EXPECT_GT(same->nll_exact, 0.0);
  EXPECT_EQ(e.kv().pool().stats().n_used, used_before) << "scoring left blocks behind";

  disturb(e.kv(), b, 20, 40, 0.5f);
  auto small = compare_continuation(*lm.model, e.kv(), a, b, cont, pool);
  ASSERT_TRUE(small.ok());
  disturb(e.kv(), b, 20, 40, 0.0f);
  auto large = compare_continuation(*lm.model, e.kv(), a, b, cont, pool);
  ASSERT_TRUE(large.ok());
  std::printf("%s: KL mean %.4g / %.4g (V x0.5 / x0 on 40 tokens), top-1 agreement %.3f / %.3f\n",
              GetParam().c_str(), small->mean_kl, large->mean_kl, small->top1_agreement, large->top1_agreement);
  EXPECT_GT(small->mean_kl, 0.0);
  EXPECT_GT(large->mean_kl, small->mean_kl);
  EXPECT_LE(small->p95_kl, small->max_kl);

  EXPECT_FALSE(compare_continuation(*lm.model, e.kv(), a, *e.retained(ha), {}, pool).ok());
  e.release_retained(ha);
  e.release_retained(hb);
  EXPECT_EQ(e.kv().pool().stats().n_used, 0);
}

INSTANTIATE_TEST_SUITE_P(BothModels, ContinuationQualityTest, ::testing::Values("smollm2", "gemma3"));

}  // namespace
}  // namespace agentkv
