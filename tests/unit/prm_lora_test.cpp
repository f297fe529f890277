// The verifier's LoRA adapters on tiny synthetic decoders of each family (no real model):
// - the training pass's gradient against central finite differences of its own loss;
// - zero-initialised adapters (B = 0) score bit for bit as the base model;
// - scoring with adapters leaves the policy's cache, and its next-token logits, bit for bit as they were;
// - the training pass computes what the served scorer computes (up to the serving kernels' f16 rounding);
// - a few Adam steps lower the loss.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>

#include "kv/direct_prefill.h"
#include "prm/kv_scorer.h"
#include "prm/verify_pass.h"
#include "prm/verify_training.h"
#include "synthetic_decoder.h"

namespace agentkv::prm {
namespace {

using testing::synthetic_decoder;

// Contexts of 9 and 6 tokens: with the two verify-prefix tokens the verify token sits at slot 11 or
// 8, past gemma's sliding window of 4, so the window's lower edge is exercised.
const std::vector<std::vector<int32_t>> kContexts = {{1, 5, 9, 2, 14, 3, 3, 8, 11}, {2, 7, 0, 13, 6, 4}};

VerifyHead synthetic_head() {
  VerifyHead h;
  h.tokens = {12, 10, 15};
  h.pos_token = 6;
  h.neg_token = 9;
  return h;
}

// Adapters whose B is random too (in +-0.3, scale 2), so that every A and B has a gradient.
LoraAdapters random_adapters(const ModelConfig& c, int rank, uint64_t seed) {
  LoraAdapters a = LoraAdapters::create(c, rank, 2.0f * float(rank), seed);
  uint64_t st = seed;
  for (int il = 0; il < c.n_layer; ++il)
    for (int p = 0; p < kLoraProjections; ++p)
      for (size_t i = 0; i < size_t(rank) * size_t(a.out_dim(LoraProj(p))); ++i) {
        st = st * 6364136223846793005ull + 1442695040888963407ull;
        a.b(il, LoraProj(p))[i] = float(0.3 * (double(st >> 11) * 0x1.0p-53 * 2.0 - 1.0));
      }
  return a;
}

struct LoraSetup {
  testing::SyntheticModel m;
  ThreadPool pool{1};
  std::unique_ptr<KvManager> kv;
  std::vector<KvSequence> contexts;

  explicit LoraSetup(const std::string& arch) : m(synthetic_decoder(arch)) {
    auto k = private_kv_manager(m.model->config(), 42, 256, 4);
    EXPECT_TRUE(k.ok()) << k.error();
    kv = std::move(*k);
    std::vector<std::span<const int32_t>> toks(kContexts.begin(), kContexts.end());
    auto seqs = prefill_new(*m.model, *kv, toks, pool);
    EXPECT_TRUE(seqs.ok()) << seqs.error();
    contexts = std::move(*seqs);
  }
  std::vector<const KvSequence*> context_ptrs() const {
    std::vector<const KvSequence*> out;
    for (const KvSequence& s : contexts) out.push_back(&s);
    return out;
  }
  Result<PrmScores> score(const VerifyHead& head) {
    const auto ptrs = context_ptrs();
    return kv_prm_score(*m.model, *kv, ptrs, head, pool);
  }
};

class PrmLoraTest : public ::testing::TestWithParam<std::string> {};

// d loss / d t at t = 0 of loss(params + t * dir), by the five-point stencil (error O(h^4)), so the
// step can be large enough for the pass's float rounding to stay small beside the difference.
double numeric_derivative(LoraSetup& s, const VerifyContext& ctx, const VerifyHead& head, LoraAdapters& ad,
                          std::span<const float> dir, double h, double target, VerifyLoss loss) {
  const std::vector<float> keep(ad.params().begin(), ad.params().end());
  auto at = [&](double t) {
    for (size_t i = 0; i < keep.size(); ++i) ad.params()[i] = keep[i] + float(t * double(dir[i]));
    auto r = verify_pass(*s.m.model, ctx, head, ad, target, loss, nullptr, s.pool);
    EXPECT_TRUE(r.ok());
    return r.ok() ? r->loss : 0.0;
  };
  const double d = (8.0 * (at(h) - at(-h)) - (at(2 * h) - at(-2 * h))) / (12.0 * h);
  std::copy(keep.begin(), keep.end(), ad.params().begin());
  return d;
}

// Bounds, for both losses: per parameter (one A and one B entry of every projection of both blocks,
// a step of 4e-2), |analytic - numeric| <= 5e-3 * max(|analytic|, |numeric|, 1e-2 * the largest
// gradient checked); along a random +-1 direction over every parameter at once (a step of 2e-3),
// relative error <= 2e-4. Measured: at most 1.7e-3 per parameter and 5.2e-5 along the direction. The
// pass keeps activations in float, so its loss carries ~1e-8 of rounding, which the stencil divides
// by its step: that, not the gradient, limits the per-parameter figure.
TEST_P(PrmLoraTest, AdapterGradientMatchesCentralFiniteDifferences) {
  LoraSetup s(GetParam());
  const ModelConfig& c = s.m.model->config();
  const VerifyHead head = synthetic_head();
  auto ctxs = prepare_verify_contexts(*s.m.model, *s.kv, s.context_ptrs(), head, s.pool);
  ASSERT_TRUE(ctxs.ok()) << ctxs.error();
  LoraAdapters ad = random_adapters(c, 3, 7);
  double worst = 0, worst_dir = 0;
  for (VerifyLoss loss : {VerifyLoss::kSquaredError, VerifyLoss::kCrossEntropy}) {
    const VerifyContext& ctx = (*ctxs)[loss == VerifyLoss::kSquaredError ? 0 : 1];
    const double target = loss == VerifyLoss::kSquaredError ? 0.8 : 0.3;
    LoraAdapters grad = ad.zeros_like();
    auto base = verify_pass(*s.m.model, ctx, head, ad, target, loss, &grad, s.pool);
    ASSERT_TRUE(base.ok()) << base.error();
    std::vector<size_t> idx;
    for (int il = 0; il < c.n_layer; ++il)
      for (int p = 0; p < kLoraProjections; ++p) {
        const auto proj = LoraProj(p);
        const size_t a0 = size_t(ad.a(il, proj) - ad.params().data());
        const size_t b0 = size_t(ad.b(il, proj) - ad.params().data());
        idx.push_back(a0 + (size_t(il) * 7 + size_t(p) * 3) % (size_t(ad.rank()) * size_t(ad.in_dim(proj))));
        idx.push_back(b0 + (size_t(il) * 5 + size_t(p) * 11) % (size_t(ad.rank()) * size_t(ad.out_dim(proj))));
      }
    double gmax = 0;
    for (size_t i : idx) gmax = std::max(gmax, std::abs(double(grad.params()[i])));
    ASSERT_GT(gmax, 1e-4);
    std::vector<float> dir(ad.params().size(), 0.0f);
    for (size_t i : idx) {
      dir[i] = 1.0f;
      const double numeric = numeric_derivative(s, ctx, head, ad, dir, 4e-2, target, loss);
      dir[i] = 0.0f;
      const double analytic = grad.params()[i];
      const double rel = std::abs(numeric - analytic) / std::max({std::abs(numeric), std::abs(analytic), 1e-2 * gmax});
      worst = std::max(worst, rel);
      EXPECT_LT(rel, 5e-3) << "parameter " << i << ": analytic " << analytic << ", numeric " << numeric;
    }
    double analytic = 0;
    uint64_t st = 99;
    for (size_t i = 0; i < dir.size(); ++i) {
      st = st * 6364136223846793005ull + 1442695040888963407ull;
      dir[i] = (st >> 63) ? 1.0f : -1.0f;
      analytic += double(dir[i]) * double(grad.params()[i]);
    }
    const double numeric = numeric_derivative(s, ctx, head, ad, dir, 2e-3, target, loss);
    const double rel = std::abs(numeric - analytic) / std::max(std::abs(numeric), std::abs(analytic));
    worst_dir = std::max(worst_dir, rel);
    EXPECT_LT(rel, 2e-4) << "random direction: analytic " << analytic << ", numeric " << numeric;
  }
  std::printf("[ %s ] gradient check: max relative error %.3g per parameter, %.3g along a random direction\n",
              GetParam().c_str(), worst, worst_dir);
}

TEST_P(PrmLoraTest, ZeroInitialisedAdaptersScoreBitForBitAsTheBaseModel) {
  LoraSetup s(GetParam());
  VerifyHead head = synthetic_head();
  auto base = s.score(head);
  ASSERT_TRUE(base.ok()) << base.error();
  head.adapters = std::make_shared<LoraAdapters>(LoraAdapters::create(s.m.model->config(), 4, 8.0f, 3));
  auto adapted = s.score(head);
  ASSERT_TRUE(adapted.ok()) << adapted.error();
  ASSERT_EQ(base->logodds.size(), kContexts.size());
  ASSERT_EQ(adapted->logodds.size(), kContexts.size());
  EXPECT_EQ(0, std::memcmp(base->logodds.data(), adapted->logodds.data(), base->logodds.size() * sizeof(float)));
  EXPECT_EQ(base->score, adapted->score);
}

// Next-token logits of each context, from a fork given `next` (the fork is dropped).
std::vector<float> next_logits(LoraSetup& s, int32_t next) {
  std::vector<float> all;
  for (const KvSequence& ctx : s.contexts) {
    KvSequence f = ctx.fork();
    std::vector<float> logits;
    const int32_t tok[] = {next};
    EXPECT_TRUE(prefill_sequence(*s.m.model, *s.kv, f, tok, s.pool, RowOutputs{&logits}).ok());
    all.insert(all.end(), logits.begin(), logits.end());
  }
  return all;
}

TEST_P(PrmLoraTest, ScoringWithAdaptersLeavesThePolicyLogitsBitForBit) {
  LoraSetup s(GetParam());
  const std::vector<float> before = next_logits(s, 5);
  VerifyHead head = synthetic_head();
  auto base = s.score(head);
  head.adapters = std::make_shared<LoraAdapters>(random_adapters(s.m.model->config(), 4, 11));
  auto adapted = s.score(head);
  ASSERT_TRUE(base.ok() && adapted.ok());
  for (size_t i = 0; i < kContexts.size(); ++i)
    EXPECT_NE(base->logodds[i], adapted->logodds[i]) << "the adapters changed nothing: the test would be vacuous";
  const std::vector<float> after = next_logits(s, 5);
  ASSERT_EQ(before.size(), after.size());
  EXPECT_EQ(0, std::memcmp(before.data(), after.data(), before.size() * sizeof(float)));
  for (size_t i = 0; i < kContexts.size(); ++i) EXPECT_EQ(s.contexts[i].tokens(), kContexts[i]);
}

// Bound: 0.05 in log-odds. The served scorer rounds the verify token's own K/V, its Q (for the K dot)
// and the softmax weights to f16 and evaluates GELU through an f16 table; the training pass does not.
TEST_P(PrmLoraTest, TrainingPassAgreesWithTheServedScore) {
  LoraSetup s(GetParam());
  VerifyHead head = synthetic_head();
  auto ad = std::make_shared<LoraAdapters>(random_adapters(s.m.model->config(), 4, 5));
  head.adapters = ad;
  auto served = s.score(head);
  ASSERT_TRUE(served.ok()) << served.error();
  auto ctxs = prepare_verify_contexts(*s.m.model, *s.kv, s.context_ptrs(), head, s.pool);
  ASSERT_TRUE(ctxs.ok()) << ctxs.error();
  for (size_t i = 0; i < ctxs->size(); ++i) {
    auto r = verify_pass(*s.m.model, (*ctxs)[i], head, *ad, 1.0, VerifyLoss::kSquaredError, nullptr, s.pool);
    ASSERT_TRUE(r.ok()) << r.error();
    EXPECT_NEAR(r->logodds, served->logodds[i], 0.05) << "context " << i;
    EXPECT_GT(std::abs(served->logodds[i]), 1e-3);
  }
}

TEST_P(PrmLoraTest, AdamStepsLowerTheLoss) {
  LoraSetup s(GetParam());
  VerifyHead head = synthetic_head();
  auto ctxs = prepare_verify_contexts(*s.m.model, *s.kv, s.context_ptrs(), head, s.pool);
  ASSERT_TRUE(ctxs.ok()) << ctxs.error();
  LoraAdapters ad = LoraAdapters::create(s.m.model->config(), 4, 8.0f, 9);
  const std::vector<VerifyExample> batch = {{&(*ctxs)[0], 1.0}, {&(*ctxs)[1], 0.0}};
  OptimizerState state;
  const OptimizerOptions opt{.kind = OptimizerOptions::Kind::kAdam, .lr = 1e-2};
  double first = 0, last = 0;
  for (int step = 0; step < 30; ++step) {
    auto r = train_step(*s.m.model, batch, head, ad, VerifyLoss::kSquaredError, opt, state, s.pool);
    ASSERT_TRUE(r.ok()) << r.error();
    (step == 0 ? first : last) = r->mean_loss;
  }
  EXPECT_LT(last, 0.25 * first) << "first " << first << ", last " << last;
}

INSTANTIATE_TEST_SUITE_P(Families, PrmLoraTest, ::testing::Values("llama", "gemma3", "gemma2"));

}  // namespace
}  // namespace agentkv::prm
