// The verifier's LoRA adapters on the real models (SmolLM2 and Gemma 3), on two policy contexts of
// an arithmetic problem with the real verify head:
// - zero-initialised adapters (B = 0) give the base model's KV-PRM log-odds bit for bit;
// - scoring with non-zero adapters leaves the policy's next-token logits bit for bit as they were;
// - the training pass's gradient against five-point finite differences (tests/unit/lora_gradient_check.h)
//   on the first, a middle and the last block;
// - the training pass against the served score with the same adapters.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <span>

#include "../unit/lora_gradient_check.h"
#include "kv/direct_prefill.h"
#include "lab/prm/fit_prm.h"
#include "prm/adapter_file.h"
#include "model_test_util.h"
#include "prm/kv_scorer.h"
#include "prm/verify_pass.h"
#include "prm/verify_training.h"

namespace agentkv::prm {
namespace {

const char* const kTrajectories[] = {
    "Solve: 17 + 25 - 9.\nStep 1: 17 + 25 = 42\n",
    "Solve: 17 + 25 - 9.\nStep 1: 17 + 25 = 42\nStep 2: 42 - 9 = 35\n",
};

struct RealSetup {
  const LoadedModel& lm;
  std::unique_ptr<KvManager> kv;
  VerifyHead head;
  std::vector<KvSequence> contexts;

  explicit RealSetup(const std::string& alias, std::span<const char* const> trajectories = kTrajectories)
      : lm(agentkv::testing::real_model(alias)) {
    auto k = private_kv_manager(lm, 1024, 16);
    EXPECT_TRUE(k.ok()) << k.error();
    kv = std::move(*k);
    auto h = make_verify_head(*lm.tokenizer);
    EXPECT_TRUE(h.ok()) << h.error();
    head = *h;
    std::vector<std::vector<int32_t>> toks;
    for (const char* t : trajectories) toks.push_back(lm.tokenizer->encode(t, lm.tokenizer->add_bos_default(), false));
    std::vector<std::span<const int32_t>> spans(toks.begin(), toks.end());
    auto seqs = prefill_new(*lm.model, *kv, spans, agentkv::testing::test_pool());
    EXPECT_TRUE(seqs.ok()) << seqs.error();
    contexts = std::move(*seqs);
  }
  std::vector<const KvSequence*> ptrs() const {
    std::vector<const KvSequence*> out;
    for (const KvSequence& s : contexts) out.push_back(&s);
    return out;
  }
  Result<PrmScores> score(const VerifyHead& h) { return kv_prm_score(*lm.model, *kv, ptrs(), h, agentkv::testing::test_pool()); }
  std::vector<float> next_logits(int32_t next) {
    std::vector<float> all;
    for (const KvSequence& ctx : contexts) {
      KvSequence f = ctx.fork();
      std::vector<float> logits;
      const int32_t tok[] = {next};
      EXPECT_TRUE(prefill_sequence(*lm.model, *kv, f, tok, agentkv::testing::test_pool(), RowOutputs{&logits}).ok());
      all.insert(all.end(), logits.begin(), logits.end());
    }
    return all;
  }
};

class PrmLoraModelTest : public ::testing::TestWithParam<std::string> {};

TEST_P(PrmLoraModelTest, ZeroInitialisedAdaptersScoreBitForBitAsTheBaseModel) {
  RealSetup s(GetParam());
  auto base = s.score(s.head);
  ASSERT_TRUE(base.ok()) << base.error();
  VerifyHead adapted_head = s.head;
  adapted_head.adapters = std::make_shared<LoraAdapters>(LoraAdapters::create(s.lm.config(), 16, 32.0f, 1));
  auto adapted = s.score(adapted_head);
  ASSERT_TRUE(adapted.ok()) << adapted.error();
  ASSERT_EQ(base->logodds.size(), std::size(kTrajectories));
  EXPECT_EQ(0, std::memcmp(base->logodds.data(), adapted->logodds.data(), base->logodds.size() * sizeof(float)));
  EXPECT_EQ(base->score, adapted->score);
}

TEST_P(PrmLoraModelTest, ScoringWithAdaptersLeavesThePolicyLogitsBitForBit) {
  RealSetup s(GetParam());
  const int32_t next = s.lm.tokenizer->encode("Step", false, false).at(0);
  const std::vector<float> before = s.next_logits(next);
  auto base = s.score(s.head);
  VerifyHead adapted_head = s.head;
  adapted_head.adapters = std::make_shared<LoraAdapters>(lora_check::random_adapters(s.lm.config(), 4, 3, 0.05f));
  auto adapted = s.score(adapted_head);
  ASSERT_TRUE(base.ok() && adapted.ok());
  for (size_t i = 0; i < s.contexts.size(); ++i) EXPECT_NE(base->logodds[i], adapted->logodds[i]);
  const std::vector<float> after = s.next_logits(next);
  ASSERT_EQ(before.size(), after.size());
  EXPECT_EQ(0, std::memcmp(before.data(), after.data(), before.size() * sizeof(float)));
}

// Bound: relative error <= 1e-2 along the gradient over each adapter tensor of the first, a middle
// and the last block, and over all parameters (rank 2, squared error; each step sized to move the
// loss by 1e-4, at most 1; a tensor whose derivative is under 1e-3 of the largest is judged against
// that). The loss of thirty float blocks jitters by ~2e-7 under any perturbation, which buries a
// random direction's derivative; the gradient's own direction has the largest derivative there is.
// Measured: 5.8e-3 (SmolLM2), 5.9e-3 (Gemma 3).
TEST_P(PrmLoraModelTest, AdapterGradientMatchesFiniteDifferences) {
  RealSetup s(GetParam());
  auto ctxs = prepare_verify_contexts(*s.lm.model, *s.kv, s.ptrs(), s.head, agentkv::testing::test_pool());
  ASSERT_TRUE(ctxs.ok()) << ctxs.error();
  LoraAdapters ad = lora_check::random_adapters(s.lm.config(), 2, 5, 0.05f);
  const int n = s.lm.config().n_layer;
  const int layers[] = {0, n / 2, n - 1};
  const lora_check::GradientCheck g{
      .direction = lora_check::GradientCheck::Direction::kAlongGradient, .step = 0, .bound = 1e-2, .loss_change = 1e-4,
      .floor = 1e-3};
  const double worst = lora_check::check_adapter_gradient(*s.lm.model, (*ctxs)[1], s.head, ad, 1.0,
                                                          VerifyLoss::kSquaredError,
                                                          lora_check::a_and_b_of_every_projection(ad, layers), g,
                                                          agentkv::testing::test_pool());
  std::printf("[ %s ] gradient check: max relative error %.3g\n", GetParam().c_str(), worst);
}

// Bound: 0.4 in log-odds, with zero-initialised and with random adapters. The served pass quantizes
// activations to the weights' dot format (Q8) before every product, LM head included, and rounds the
// verify token's own K/V, its Q and the softmax weights to f16; the training pass does none of it.
// Measured on two contexts: at most 0.17 (SmolLM2) and 0.25 (Gemma 3, whose logits are large).
TEST_P(PrmLoraModelTest, TrainingPassAgreesWithTheServedScore) {
  RealSetup s(GetParam());
  for (const bool zero : {true, false}) {
    VerifyHead head = s.head;
    auto ad = std::make_shared<LoraAdapters>(zero ? LoraAdapters::create(s.lm.config(), 4, 8.0f, 9)
                                                  : lora_check::random_adapters(s.lm.config(), 4, 9, 0.05f));
    head.adapters = ad;
    auto served = s.score(head);
    ASSERT_TRUE(served.ok()) << served.error();
    auto ctxs = prepare_verify_contexts(*s.lm.model, *s.kv, s.ptrs(), head, agentkv::testing::test_pool());
    ASSERT_TRUE(ctxs.ok()) << ctxs.error();
    for (size_t i = 0; i < ctxs->size(); ++i) {
      auto r = verify_pass(*s.lm.model, (*ctxs)[i], head, *ad, 1.0, VerifyLoss::kSquaredError, nullptr,
                           agentkv::testing::test_pool());
      ASSERT_TRUE(r.ok()) << r.error();
      std::printf("[ %s ] %s adapters, context %zu: served log-odds %.5f, training pass %.5f\n", GetParam().c_str(),
                  zero ? "zero" : "random", i, double(served->logodds[i]), r->logodds);
      EXPECT_NEAR(r->logodds, served->logodds[i], 0.4) << "context " << i;
    }
  }
}

// fit-prm's options for the committed one-operation steps: the first n_train train problems and
// n_heldout held-out ones.
FitPrmOptions one_op_steps(int n_train, int n_heldout) {
  FitPrmOptions o;
  o.steps_file = agentkv::testing::source_path("tests/data/prm/arith1_steps.tsv");
  o.shape = ArithShape{1, 1};
  o.n_train = n_train;
  o.n_heldout = n_heldout;
  return o;
}

// A small, quick fit: rank 2, alpha 4.
FitLoraOptions small_fit(int batch) {
  FitLoraOptions lo;
  lo.rank = 2;
  lo.alpha = 4.0f;
  lo.batch = batch;
  return lo;
}

// The optimizer moves the adapters the right way: eight Adam steps (lr 3e-4) on a right and a wrong
// step (targets 1 and 0) lower the loss and open the log-odds gap between them, for both losses (a
// sign error in the gradient or the update, or an update that never lands, closes or keeps it).
// Bound: the gap grows by at least 0.04. Measured 2026-12-03: -0.013 -> 0.079 (mse), -> 0.077
// (bce); at lr 3e-3 the gap grows no faster (0.13) while both P("+") saturate together (mse loss
// 0.50): the two contexts differ by one digit and the verify token's state barely moves with it.
TEST(PrmLoraFit, AdamStepsSeparateARightFromAWrongStep) {
  const char* const steps[] = {"Solve: 17 + 25 - 9.\nStep 1: 17 + 25 = 42\n", "Solve: 17 + 25 - 9.\nStep 1: 17 + 25 = 41\n"};
  RealSetup s("smollm2", steps);
  auto ctxs = prepare_verify_contexts(*s.lm.model, *s.kv, s.ptrs(), s.head, agentkv::testing::test_pool());
  ASSERT_TRUE(ctxs.ok()) << ctxs.error();
  for (VerifyLoss loss : {VerifyLoss::kSquaredError, VerifyLoss::kCrossEntropy}) {
    LoraAdapters ad = LoraAdapters::create(s.lm.config(), 8, 16.0f, 1);
    const VerifyExample batch[] = {{&(*ctxs)[0], 1.0}, {&(*ctxs)[1], 0.0}};
    OptimizerOptions opt;
    opt.lr = 3e-4;
    OptimizerState state;
    auto gap = [&] {
      double z[2];
      for (int i = 0; i < 2; ++i) {
        auto r = verify_pass(*s.lm.model, (*ctxs)[size_t(i)], s.head, ad, batch[i].target, loss, nullptr,
                             agentkv::testing::test_pool());
        EXPECT_TRUE(r.ok()) << r.error();
        z[i] = r.ok() ? r->logodds : 0.0;
      }
      return z[0] - z[1];
    };
    const double gap0 = gap();
    double first_loss = 0, last_loss = 0;
    for (int step = 0; step < 8; ++step) {
      auto r = train_step(*s.lm.model, batch, s.head, ad, loss, opt, state, agentkv::testing::test_pool());
      ASSERT_TRUE(r.ok()) << r.error();
      (step == 0 ? first_loss : last_loss) = r->mean_loss;
    }
    const double gap1 = gap();
    std::printf("[ smollm2 ] %s: log-odds gap %.4f -> %.4f, loss %.5f -> %.5f\n",
                loss == VerifyLoss::kSquaredError ? "mse" : "bce", gap0, gap1, first_loss, last_loss);
    EXPECT_GT(gap1, gap0 + 0.04);
    EXPECT_LT(last_loss, first_loss);
  }
}

// fit-prm --lora on the committed one-operation steps (two train problems, one epoch): the loss is
// finite, and the adapter file it writes reads back bit for bit for SmolLM2 and is refused for Gemma 3.
TEST(PrmLoraFit, FitPrmLoraWritesAnAdapterFileForItsModelOnly) {
  const LoadedModel& lm = agentkv::testing::real_model("smollm2");
  const FitPrmOptions o = one_op_steps(2, 0);
  const FitLoraOptions lo = small_fit(4);
  auto rep = fit_prm_lora(lm, o, lo, agentkv::testing::test_pool());
  ASSERT_TRUE(rep.ok()) << rep.error();
  ASSERT_EQ(rep->fit.epoch_loss.size(), 1u);
  EXPECT_TRUE(std::isfinite(rep->fit.epoch_loss[0]));
  EXPECT_GT(rep->fit.n_examples, 0);
  const std::string path = ::testing::TempDir() + "fit_prm_lora_adapters.gguf";
  ASSERT_TRUE(write_adapter_file(path, rep->adapters, rep->record).ok());
  auto back = read_adapter_file(path, lm.config(), lm.fingerprint);
  ASSERT_TRUE(back.ok()) << back.error();
  EXPECT_EQ(0, std::memcmp(back->adapters.params().data(), rep->adapters.params().data(),
                           rep->adapters.params().size() * sizeof(float)));
  const LoadedModel& other = agentkv::testing::real_model("gemma3");
  auto refused = read_adapter_file(path, other.config(), other.fingerprint);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.code(), ErrorCode::kConflict);
}

// fit-prm --lora --average D: with one optimizer step (one batch holds every example) the adapters
// written are exactly D * the initial ones + (1 - D) * the last step's, computed as the fit computes it.
TEST(PrmLoraFit, AverageOfOneStepBlendsTheInitialAndTheUpdatedAdapters) {
  const LoadedModel& lm = agentkv::testing::real_model("smollm2");
  const FitPrmOptions o = one_op_steps(2, 0);
  FitLoraOptions lo = small_fit(4096);
  auto last = fit_prm_lora(lm, o, lo, agentkv::testing::test_pool());
  ASSERT_TRUE(last.ok()) << last.error();
  lo.average_decay = 0.75;
  auto avg = fit_prm_lora(lm, o, lo, agentkv::testing::test_pool());
  ASSERT_TRUE(avg.ok()) << avg.error();
  const LoraAdapters init = LoraAdapters::create(lm.config(), lo.rank, lo.alpha, lo.seed);
  std::span<const float> p0 = init.params(), p1 = last->adapters.params(), a = avg->adapters.params();
  ASSERT_EQ(a.size(), p0.size());
  size_t moved = 0, mismatched = 0;
  for (size_t k = 0; k < a.size(); ++k) {
    moved += p1[k] != p0[k];
    mismatched += a[k] != 0.75f * p0[k] + (1.0f - 0.75f) * p1[k];
  }
  EXPECT_GT(moved, 0u);
  EXPECT_EQ(mismatched, 0u);
  lo.average_decay = 1.0;
  auto refused = fit_prm_lora(lm, o, lo, agentkv::testing::test_pool());
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().find("decay"), std::string::npos) << refused.error();
}

// fit-prm --lora keeps the train contexts of its first epoch for the later ones (nine problems: two
// groups of the step contexts); the fit that builds them again every epoch trains the same adapters,
// bit for bit. A share of the budget outside [0, 1] is refused.
TEST(PrmLoraFit, KeepingTheTrainContextsAcrossEpochsChangesNothing) {
  const LoadedModel& lm = agentkv::testing::real_model("smollm2");
  auto set = read_step_dump(lm, agentkv::testing::source_path("tests/data/prm/arith1_steps.tsv"), ArithSplit::kTrain,
                            9, ArithShape{1, 1});
  ASSERT_TRUE(set.ok()) << set.error();
  auto head = make_verify_head(*lm.tokenizer);
  ASSERT_TRUE(head.ok()) << head.error();
  head->read_logits = true;
  FitLoraOptions lo = small_fit(4);
  lo.epochs = 2;
  auto fit = [&](double share, LoraFitFigures* fig) {
    lo.keep_contexts_share = share;
    LoraAdapters ad = LoraAdapters::create(lm.config(), lo.rank, lo.alpha, lo.seed);
    auto r = fit_lora_adapters(lm, *set, {}, *head, ad, lo, agentkv::testing::test_pool());
    EXPECT_TRUE(r.ok()) << r.error();
    if (r.ok()) *fig = *r;
    return ad;
  };
  LoraFitFigures kept_fig, rebuilt_fig;
  const LoraAdapters kept = fit(0.5, &kept_fig);
  const LoraAdapters rebuilt = fit(0.0, &rebuilt_fig);
  EXPECT_EQ(kept_fig.kept_problems, 9u);
  EXPECT_EQ(rebuilt_fig.kept_problems, 0u);
  const size_t n = kept.params().size();
  ASSERT_EQ(rebuilt.params().size(), n);
  EXPECT_EQ(0, std::memcmp(kept.params().data(), rebuilt.params().data(), n * sizeof(float)));
  EXPECT_EQ(kept_fig.epoch_loss, rebuilt_fig.epoch_loss);
  lo.keep_contexts_share = 1.5;
  LoraAdapters ad = LoraAdapters::create(lm.config(), lo.rank, lo.alpha, lo.seed);
  EXPECT_FALSE(fit_lora_adapters(lm, *set, {}, *head, ad, lo, agentkv::testing::test_pool()).ok());
}

// The trained verifier separates held-out steps: fit-prm --lora --loss pairwise on the committed
// one-operation steps (10 train problems: 50 steps, 13 correct; 6 epochs, rank 8, alpha 16, Adam lr
// 3e-4, batch 8), then the adapted verifier scores the 8 held-out problems' 43 steps (8 correct) as
// serving scores them. Measured 2026-12-04: held-out AUROC 0.8036 with the adapters, 0.5143 without.
// With 8 positives against 35 negatives the AUROC's standard error is about 0.08 (Hanley-McNeil), so
// the bound (0.72) is the measurement less one standard error and ~2.5 standard errors over the base
// model, which the mse and bce losses never passed (0.43-0.50 on the same split, BENCHMARKS.md).
constexpr double kMeasuredPairwiseOneOpHeldoutAuroc = 0.8036;
constexpr double kMinPairwiseOneOpHeldoutAuroc = 0.72;

TEST(PrmLoraFit, PairwiseFitSeparatesHeldOutOneOperationSteps) {
  const LoadedModel& lm = agentkv::testing::real_model("smollm2");
  const FitPrmOptions o = one_op_steps(10, 8);
  FitLoraOptions lo;
  lo.epochs = 6;
  lo.loss = VerifyLoss::kPairwise;
  lo.optimizer.lr = 3e-4;
  auto rep = fit_prm_lora(lm, o, lo, agentkv::testing::test_pool(),
                          [](const std::string& line) { std::printf("%s\n", line.c_str()); });
  ASSERT_TRUE(rep.ok()) << rep.error();
  std::printf("pairwise LoRA, one operation: held-out AUROC %.4f with the adapters, %.4f without (%lld steps, "
              "%lld correct); measured %.4f\n",
              rep->heldout.auroc, rep->heldout.logodds_auroc, (long long)rep->heldout.n_steps,
              (long long)rep->heldout.n_steps_correct, kMeasuredPairwiseOneOpHeldoutAuroc);
  RecordProperty("pairwise_one_op_heldout_auroc", std::to_string(rep->heldout.auroc));
  ASSERT_EQ(rep->heldout.n_steps, 43);
  ASSERT_EQ(rep->heldout.n_steps_correct, 8);
  EXPECT_GT(rep->heldout.auroc, kMinPairwiseOneOpHeldoutAuroc);
  EXPECT_GT(rep->heldout.auroc, rep->heldout.logodds_auroc + 0.15);
}

INSTANTIATE_TEST_SUITE_P(RealModels, PrmLoraModelTest, ::testing::Values("smollm2", "gemma3"));

}  // namespace
}  // namespace agentkv::prm
