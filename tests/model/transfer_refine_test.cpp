// Refining a transfer map by the receiver's continuation loss (lab/transfer/transfer_refine.h) on the
// real models, Gemma 3 → SmolLM2 (the direction whose maps keep least): a step lowers the loss of the
// passage it was taken on, the refined map is still a valid map of the pair (it survives its file),
// and a map the refiner cannot follow or of another pair is refused.
#include <gtest/gtest.h>

#include <cstdio>

#include "kjv_corpus.h"
#include "model_test_util.h"
#include "lab/transfer/transfer_fit.h"
#include "lab/transfer/transfer_refine.h"

namespace agentkv::testing {
namespace {

// Gemma 3 → SmolLM2 on Exodus 5-6 (~300 tokens each), alpha 0.1 (kv_transfer_test.cpp's small map).
const TransferMap& small_map() {
  static TransferMap map = [] {
    TransferFitOptions o;
    o.ridge_alpha = 0.1;
    TransferFitter fit(real_model("gemma3"), real_model("smollm2"), o);
    for (const std::string& ch : kjv_chapters("ex", 5, 6)) EXPECT_TRUE(fit.add_passage(cut_at_space(ch, 1400), test_pool()).ok());
    auto m = fit.solve();
    EXPECT_TRUE(m.ok()) << m.error();
    return m.ok() ? *m : TransferMap{};
  }();
  return map;
}

// John 1: ~1000 bytes of context, ~300 of continuation.
struct Passage {
  std::string context, continuation;
};
Passage john() {
  const std::string ch = kjv_chapters("joh", 1, 1)[0];
  Passage p{cut_at_space(ch, 1000), ""};
  p.continuation = cut_at_space(ch.substr(p.context.size()), 300);
  return p;
}

// A small step (lr 0.002) along the preconditioned gradient of the passage's own loss lowers it. The
// gradient leaves out the native suffix's dependence on the transferred K/V (rebuilt at the next
// step), so this checks the step is still a descent direction for the whole hybrid.
TEST(TransferRefine, AStepLowersThePassagesLoss) {
  const LoadedModel& g = real_model("gemma3");
  const LoadedModel& s = real_model("smollm2");
  TransferRefineOptions opt;
  opt.lr = 0.002;
  opt.queries = 16;
  auto refiner = TransferRefiner::create(small_map(), g, s, opt);
  ASSERT_TRUE(refiner.ok()) << refiner.error();
  const Passage p = john();
  auto first = refiner->step(p.context, p.continuation, test_pool());
  ASSERT_TRUE(first.ok()) << first.error();
  auto second = refiner->step(p.context, p.continuation, test_pool());
  ASSERT_TRUE(second.ok()) << second.error();
  std::printf("NLL %.4f -> %.4f after one step of %.3g (%lld queries, %lld transferred rows)\n", first->nll,
              second->nll, first->step_scale, (long long)first->queries, (long long)first->projected_rows);
  EXPECT_EQ(first->queries, 16);
  EXPECT_GT(first->projected_rows, 100);
  EXPECT_GT(first->step_scale, 0.0);
  EXPECT_LT(second->nll, first->nll);
  // Still a map of the pair, checked and checksummed through its file.
  const std::string path = ::testing::TempDir() + "refined.gguf";
  ASSERT_TRUE(save_transfer_map(refiner->map(), path).ok());
  auto back = load_transfer_map(path, g, s);
  std::remove(path.c_str());
  ASSERT_TRUE(back.ok()) << back.error();
  EXPECT_EQ(back->weights, refiner->map().weights);
  EXPECT_NE(back->weights, small_map().weights);
}

TEST(TransferRefine, RefusesAnotherPairAndAConditionedMap) {
  const LoadedModel& g = real_model("gemma3");
  const LoadedModel& s = real_model("smollm2");
  auto swapped = TransferRefiner::create(small_map(), s, g);
  ASSERT_FALSE(swapped.ok());
  TransferMap conditioned = small_map();
  conditioned.receiver_hidden_layers = 2;
  conditioned.receiver_hidden_dim = s.config().n_embd;
  auto c = TransferRefiner::create(conditioned, g, s);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.error().find("conditioned"), std::string::npos) << c.error();
  TransferRefineOptions all_native;
  all_native.native_suffix_share = 1.0;
  EXPECT_FALSE(TransferRefiner::create(small_map(), g, s, all_native).ok());
}

}  // namespace
}  // namespace agentkv::testing
