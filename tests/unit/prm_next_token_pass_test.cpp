// The next-token pass over a frozen cache (prm/next_token_pass.h) on tiny synthetic decoders of each
// family (no real model):
// - its NLL is the served model's (log-softmax of the logits prefill gives the same token), up to the
//   serving kernels' f16 rounding;
// - its gradient with respect to the cached K and V matches finite differences of its own loss, the
//   cache perturbed in place (the deltas read back after the f16 store, so its rounding is no error).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>

#include "kv/direct_prefill.h"
#include "ops/attention.h"
#include "prm/next_token_pass.h"
#include "synthetic_decoder.h"

namespace agentkv::prm {
namespace {

using agentkv::testing::synthetic_decoder;

// 11 cached tokens: past gemma's sliding window of 4, so the window's lower edge is exercised.
const std::vector<int32_t> kContext = {1, 5, 9, 2, 14, 3, 3, 8, 11, 0, 6};
constexpr int32_t kToken = 12, kTarget = 7;

struct PassSetup {
  agentkv::testing::SyntheticModel m;
  ThreadPool pool{1};
  std::unique_ptr<KvManager> kv;
  std::vector<KvSequence> seqs;

  explicit PassSetup(const std::string& arch) : m(synthetic_decoder(arch)) {
    auto k = private_kv_manager(m.model->config(), 42, 64, 4);
    EXPECT_TRUE(k.ok()) << k.error();
    kv = std::move(*k);
    const std::span<const int32_t> toks[] = {kContext};
    auto s = prefill_new(*m.model, *kv, toks, pool);
    EXPECT_TRUE(s.ok()) << s.error();
    seqs = std::move(*s);
  }
  VerifyContext context() const { return VerifyContext{seqs[0].fork(), int64_t(kContext.size())}; }
  double nll(const VerifyContext& ctx, CachedKvGradient* g = nullptr) {
    auto r = next_token_nll(*m.model, ctx, kToken, kTarget, g, pool);
    EXPECT_TRUE(r.ok()) << r.error();
    return r.ok() ? *r : 0.0;
  }
};

class NextTokenPassTest : public ::testing::TestWithParam<std::string> {};

// Bound 0.02 nats: the served pass rounds the token's K/V, Q and the softmax weights to f16.
TEST_P(NextTokenPassTest, NllIsTheServedModelsLogSoftmax) {
  PassSetup s(GetParam());
  const double pass = s.nll(s.context());
  KvSequence f = s.seqs[0].fork();
  std::vector<float> logits;
  const int32_t tok[] = {kToken};
  ASSERT_TRUE(prefill_sequence(*s.m.model, *s.kv, f, tok, s.pool, RowOutputs{&logits}).ok());
  double mx = -1e300, sum = 0;
  for (float z : logits) mx = std::max(mx, double(z));
  for (float z : logits) sum += std::exp(double(z) - mx);
  const double served = mx + std::log(sum) - double(logits[size_t(kTarget)]);
  EXPECT_NEAR(pass, served, 0.02);
  EXPECT_GT(pass, 0.0);
}

TEST_P(NextTokenPassTest, RefusesTokensOutsideTheVocabulary) {
  PassSetup s(GetParam());
  const VerifyContext ctx = s.context();
  EXPECT_FALSE(next_token_nll(*s.m.model, ctx, -1, kTarget, nullptr, s.pool).ok());
  auto r = next_token_nll(*s.m.model, ctx, kToken, agentkv::testing::kSynthVocab, nullptr, s.pool);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().find("vocabulary"), std::string::npos) << r.error();
}

// Each layer's cached K, then V, moved along the analytic gradient by a step of L2 length h (about
// a hundredth of the attended rows' norm), up and down: (L+ - L-) against the gradient's dot with
// the deltas as stored. Bound 5e-3 relative (measured at most 7.9e-4 over the three families): the
// second-order terms cancel between the two sides up to the f16 store's asymmetry, the third-order
// ones are ~h^2 small.
TEST_P(NextTokenPassTest, CachedKvGradientMatchesFiniteDifferences) {
  PassSetup s(GetParam());
  const VerifyContext ctx = s.context();
  CachedKvGradient g;
  s.nll(ctx, &g);
  const ModelConfig& c = s.m.model->config();
  ASSERT_EQ(g.layers.size(), size_t(c.n_layer));
  const KvArena& arena = s.kv->arena();
  const int bs = arena.block_size(), kvd = c.kv_dim();
  double worst = 0;
  for (int il = 0; il < c.n_layer; ++il) {
    const CachedKvGradient::Layer& gl = g.layers[size_t(il)];
    const int64_t n = ctx.n_slots - gl.lo;
    ASSERT_EQ(gl.dk.size(), size_t(n * kvd));
    for (int kind = 0; kind < 2; ++kind) {  // 0: K, 1: V
      const std::vector<float>& grad = kind == 0 ? gl.dk : gl.dv;
      double gnorm = 0;
      for (float x : grad) gnorm += double(x) * double(x);
      gnorm = std::sqrt(gnorm);
      ASSERT_GT(gnorm, 0.0) << "layer " << il << (kind ? " V" : " K") << " has no gradient";
      const PagedKvLayer layer = arena.layer(il);
      auto slot_ptr = [&](int64_t j) {
        const int64_t slot = gl.lo + j;
        const int32_t block = ctx.fork.blocks()[size_t(slot / bs)];
        return kind == 0 ? layer.k(block, int(slot % bs)) : layer.v(block, int(slot % bs));
      };
      std::vector<float> keep(size_t(n * kvd)), row(static_cast<size_t>(kvd));
      double rows_norm = 0;
      for (int64_t j = 0; j < n; ++j) kv_load(keep.data() + j * kvd, slot_ptr(j), kvd);
      for (float x : keep) rows_norm += double(x) * double(x);
      const double h = 0.01 * std::sqrt(rows_norm);
      // Stores keep + t * h * grad / |grad|; returns the loss and adds grad . (stored - keep) into dot.
      auto at = [&](double t, double& dot) {
        for (int64_t j = 0; j < n; ++j) {
          for (int i = 0; i < kvd; ++i) {
            const size_t e = size_t(j * kvd + i);
            row[size_t(i)] = float(double(keep[e]) + t * h * double(grad[e]) / gnorm);
          }
          kv_store(slot_ptr(j), row.data(), kvd);
          kv_load(row.data(), slot_ptr(j), kvd);
          for (int i = 0; i < kvd; ++i) {
            const size_t e = size_t(j * kvd + i);
            dot += double(grad[e]) * (double(row[size_t(i)]) - double(keep[e]));
          }
        }
        return s.nll(ctx);
      };
      double up = 0, down = 0;
      const double l_up = at(1.0, up), l_down = at(-1.0, down);
      for (int64_t j = 0; j < n; ++j) kv_store(slot_ptr(j), keep.data() + j * kvd, kvd);
      const double numeric = l_up - l_down, analytic = up - down;
      const double rel = std::abs(numeric - analytic) / std::max(std::abs(numeric), std::abs(analytic));
      worst = std::max(worst, rel);
      EXPECT_LT(rel, 5e-3) << "layer " << il << (kind ? " V" : " K") << ": analytic " << analytic << ", numeric "
                           << numeric;
    }
  }
  std::printf("[ %s ] cached K/V gradient check: max relative error %.3g\n", GetParam().c_str(), worst);
}

INSTANTIATE_TEST_SUITE_P(Families, NextTokenPassTest, ::testing::Values("llama", "gemma3", "gemma2"));

}  // namespace
}  // namespace agentkv::prm
