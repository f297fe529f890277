// The verifier's LoRA adapters on tiny synthetic decoders of each family (no real model):
// - the training pass's gradient against central finite differences of its own loss;
// - zero-initialised adapters (B = 0) score bit for bit as the base model;
// - scoring with adapters leaves the policy's cache, and its next-token logits, bit for bit as they were;
// - the training pass computes what the served scorer computes (up to the serving kernels' f16 rounding);
// - a few Adam steps lower the loss;
// - a batch run together (each weight row dequantized once) gives every example's log-odds and the
//   batch's gradient bit for bit as its examples passed one at a time.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>

#include "kv/direct_prefill.h"
#include "prm/kv_scorer.h"
#include "prm/verify_pass.h"
#include "prm/verify_pass_record.h"
#include "prm/verify_training.h"
#include "lora_gradient_check.h"
#include "synthetic_decoder.h"

namespace agentkv::prm {
namespace {

using agentkv::testing::synthetic_decoder;

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

struct LoraSetup {
  agentkv::testing::SyntheticModel m;
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

// Bound: relative error <= 5e-3 along a random +-1 direction (step of L2 length 5e-2) and along the
// gradient itself (2e-3), over each of the 28 adapter tensors (A and B of seven projections in two
// blocks) and over all parameters, for each loss. Measured: at most 1.5e-3 and 7.8e-4. The pass keeps
// activations in float, whose rounding (~1e-8 of the loss) over a shorter step, or the stencil's
// Taylor error over a longer one, would dominate.
TEST_P(PrmLoraTest, AdapterGradientMatchesCentralFiniteDifferences) {
  LoraSetup s(GetParam());
  const VerifyHead head = synthetic_head();
  auto ctxs = prepare_verify_contexts(*s.m.model, *s.kv, s.context_ptrs(), head, s.pool);
  ASSERT_TRUE(ctxs.ok()) << ctxs.error();
  LoraAdapters ad = lora_check::random_adapters(s.m.model->config(), 3, 7);
  const int layers[] = {0, 1};
  double worst[2] = {0, 0};
  using Direction = lora_check::GradientCheck::Direction;
  for (VerifyLoss loss : {VerifyLoss::kSquaredError, VerifyLoss::kCrossEntropy})
    for (Direction dir : {Direction::kRandomSigns, Direction::kAlongGradient}) {
      const bool mse = loss == VerifyLoss::kSquaredError;
      double& w = worst[dir == Direction::kAlongGradient];
      w = std::max(w, lora_check::check_adapter_gradient(*s.m.model, (*ctxs)[mse ? 0 : 1], head, ad, mse ? 0.8 : 0.3,
                                                         loss, lora_check::a_and_b_of_every_projection(ad, layers),
                                                         lora_check::GradientCheck{.direction = dir, .step = dir == Direction::kAlongGradient ? 2e-3 : 5e-2},
                                                         s.pool));
    }
  std::printf("[ %s ] gradient check: max relative error %.3g along random directions, %.3g along the gradient\n",
              GetParam().c_str(), worst[0], worst[1]);
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
  head.adapters = std::make_shared<LoraAdapters>(lora_check::random_adapters(s.m.model->config(), 4, 11));
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
// The pairwise (ranking) loss is a batch's: its gradient, backpropagated from every example's
// dloss/dlogodds, against five-point finite differences of the batch loss, along a random +-1
// direction and along the gradient over every parameter. Three examples with targets 1, 0.5 and 0
// (two contexts, one twice) make three weighted pairs. Bound 5e-3 relative, as the per-example check.
TEST_P(PrmLoraTest, PairwiseBatchGradientMatchesFiniteDifferences) {
  LoraSetup s(GetParam());
  const VerifyHead head = synthetic_head();
  auto ctxs = prepare_verify_contexts(*s.m.model, *s.kv, s.context_ptrs(), head, s.pool);
  ASSERT_TRUE(ctxs.ok()) << ctxs.error();
  LoraAdapters ad = lora_check::random_adapters(s.m.model->config(), 3, 11);
  const std::vector<VerifyExample> batch = {{&(*ctxs)[0], 1.0}, {&(*ctxs)[1], 0.0}, {&(*ctxs)[0], 0.5}};
  LoraAdapters grad = ad.zeros_like();
  auto base = batch_gradient(*s.m.model, batch, head, ad, VerifyLoss::kPairwise, &grad, s.pool);
  ASSERT_TRUE(base.ok()) << base.error();
  EXPECT_EQ(base->pairs, 3);
  const std::vector<float> keep(ad.params().begin(), ad.params().end());
  auto loss_at = [&](const std::vector<float>& dir, double t) {
    for (size_t i = 0; i < keep.size(); ++i) ad.params()[i] = keep[i] + float(t * double(dir[i]));
    auto r = batch_gradient(*s.m.model, batch, head, ad, VerifyLoss::kPairwise, nullptr, s.pool);
    EXPECT_TRUE(r.ok());
    return r.ok() ? r->mean_loss : 0.0;
  };
  uint64_t st = 5;
  for (bool along : {false, true}) {
    std::vector<float> dir(keep.size());
    double norm2 = 0;
    for (size_t i = 0; i < dir.size(); ++i) {
      st = st * 6364136223846793005ull + 1442695040888963407ull;
      dir[i] = along ? grad.params()[i] : ((st >> 63) ? 1.0f : -1.0f);
      norm2 += double(dir[i]) * double(dir[i]);
    }
    ASSERT_GT(norm2, 0);
    double analytic = 0;
    for (size_t i = 0; i < dir.size(); ++i) {
      dir[i] = float(double(dir[i]) / std::sqrt(norm2));
      analytic += double(dir[i]) * double(grad.params()[i]);
    }
    const double h = along ? 2e-3 : 5e-2;
    const double numeric =
        (8.0 * (loss_at(dir, h) - loss_at(dir, -h)) - (loss_at(dir, 2 * h) - loss_at(dir, -2 * h))) / (12.0 * h);
    const double rel = std::abs(numeric - analytic) / std::max(std::abs(numeric), std::abs(analytic));
    EXPECT_LT(rel, 5e-3) << (along ? "along the gradient" : "random direction") << ": analytic " << analytic
                         << ", numeric " << numeric;
    std::printf("[ %s ] pairwise gradient, %s: relative error %.3g\n", GetParam().c_str(),
                along ? "along the gradient" : "random direction", rel);
  }
  std::copy(keep.begin(), keep.end(), ad.params().begin());
  // A shift shared by every example's log-odds does not change the loss; a batch of equal targets has
  // no pair, no loss and no update; one example alone is refused the pairwise loss.
  const std::vector<VerifyExample> same = {{&(*ctxs)[0], 1.0}, {&(*ctxs)[1], 1.0}};
  auto none = batch_gradient(*s.m.model, same, head, ad, VerifyLoss::kPairwise, nullptr, s.pool);
  ASSERT_TRUE(none.ok()) << none.error();
  EXPECT_EQ(none->pairs, 0);
  EXPECT_EQ(none->mean_loss, 0.0);
  OptimizerState state;
  const std::vector<float> before(ad.params().begin(), ad.params().end());
  ASSERT_TRUE(train_step(*s.m.model, same, head, ad, VerifyLoss::kPairwise, {}, state, s.pool).ok());
  EXPECT_TRUE(std::equal(before.begin(), before.end(), ad.params().begin())) << "a batch without a pair moved the adapters";
  EXPECT_FALSE(verify_pass(*s.m.model, (*ctxs)[0], head, ad, 1.0, VerifyLoss::kPairwise, nullptr, s.pool).ok());
}

TEST_P(PrmLoraTest, ABatchPassesBitForBitAsItsExamplesOneAtATime) {
  LoraSetup s(GetParam());
  const VerifyHead head = synthetic_head();
  auto ctxs = prepare_verify_contexts(*s.m.model, *s.kv, s.context_ptrs(), head, s.pool);
  ASSERT_TRUE(ctxs.ok()) << ctxs.error();
  const LoraAdapters ad = lora_check::random_adapters(s.m.model->config(), 3, 13);
  const std::vector<VerifyExample> batch = {{&(*ctxs)[0], 1.0}, {&(*ctxs)[1], 0.0}, {&(*ctxs)[0], 0.5}};
  const size_t n_params = ad.params().size();
  auto same = [&](const LoraAdapters& a, const LoraAdapters& b) {
    return std::memcmp(a.params().data(), b.params().data(), n_params * sizeof(float)) == 0;
  };
  // One at a time: each example's own forward and backward (squared error: the mean of verify_pass's
  // gradients; pairwise: each example's backward with its share of the pairs' gradient).
  LoraAdapters sum = ad.zeros_like();
  std::vector<double> logodds, p_pos;
  for (const VerifyExample& ex : batch) {
    auto r = verify_pass(*s.m.model, *ex.ctx, head, ad, ex.target, VerifyLoss::kSquaredError, &sum, s.pool);
    ASSERT_TRUE(r.ok()) << r.error();
    logodds.push_back(r->logodds);
    p_pos.push_back(r->p_pos);
  }
  LoraAdapters want_mse = ad.zeros_like();
  for (size_t i = 0; i < n_params; ++i) want_mse.params()[i] += float(double(sum.params()[i]) / 3.0);
  LoraAdapters got_mse = ad.zeros_like();
  auto mse = batch_gradient(*s.m.model, batch, head, ad, VerifyLoss::kSquaredError, &got_mse, s.pool);
  ASSERT_TRUE(mse.ok()) << mse.error();
  EXPECT_TRUE(same(got_mse, want_mse)) << "squared-error gradient";
  for (size_t i = 0; i < batch.size(); ++i) EXPECT_EQ(mse->p_pos[i], p_pos[i]);

  LoraAdapters got_pair = ad.zeros_like();
  auto pair = batch_gradient(*s.m.model, batch, head, ad, VerifyLoss::kPairwise, &got_pair, s.pool);
  ASSERT_TRUE(pair.ok()) << pair.error();
  ASSERT_EQ(pair->pairs, 3);
  // The pairs' gradient per example: (0,1) w 1, (0,2) w 0.5, (2,1) w 0.5, over a weight of 2.
  auto g = [&](size_t i, size_t j, double w) { return w / (1.0 + std::exp(logodds[i] - logodds[j])); };
  std::vector<double> dl(3, 0.0);
  const struct { size_t i, j; double w; } pairs[] = {{0, 1, 1.0}, {0, 2, 0.5}, {2, 1, 0.5}};
  for (const auto& p : pairs) {
    dl[p.i] -= g(p.i, p.j, p.w);
    dl[p.j] += g(p.i, p.j, p.w);
  }
  LoraAdapters want_pair = ad.zeros_like();
  for (size_t i = 0; i < batch.size(); ++i) {
    const PassRecord rec = forward_pass(*s.m.model, *batch[i].ctx, head, ad, s.pool);
    EXPECT_EQ(rec.logodds, logodds[i]);
    backward_pass(*s.m.model, *batch[i].ctx, head, ad, rec, dl[i] / 2.0, want_pair, s.pool);
  }
  EXPECT_TRUE(same(got_pair, want_pair)) << "pairwise gradient";
}

TEST_P(PrmLoraTest, TrainingPassAgreesWithTheServedScore) {
  LoraSetup s(GetParam());
  VerifyHead head = synthetic_head();
  auto ad = std::make_shared<LoraAdapters>(lora_check::random_adapters(s.m.model->config(), 4, 5));
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
