// The adapter gradient check shared by the synthetic-model unit test and the real-model test: the
// training pass's analytic gradient against five-point finite differences of its own loss, along
// random directions over each adapter tensor and over every parameter at once.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <span>
#include <utility>
#include <vector>

#include "prm/verify_pass.h"

namespace agentkv::prm::lora_check {

// Adapters whose B is random too (in +-b_spread, scale 2), so that every A and B has a gradient.
inline LoraAdapters random_adapters(const ModelConfig& c, int rank, uint64_t seed, float b_spread = 0.3f) {
  LoraAdapters a = LoraAdapters::create(c, rank, 2.0f * float(rank), seed);
  uint64_t st = seed;
  for (int il = 0; il < c.n_layer; ++il)
    for (int p = 0; p < kLoraProjections; ++p)
      for (size_t i = 0; i < size_t(rank) * size_t(a.out_dim(LoraProj(p))); ++i) {
        st = st * 6364136223846793005ull + 1442695040888963407ull;
        a.b(il, LoraProj(p))[i] = float(b_spread * (double(st >> 11) * 0x1.0p-53 * 2.0 - 1.0));
      }
  return a;
}

// The parameter ranges [begin, end) of A and of B of every projection of each layer in `layers`.
inline std::vector<std::pair<size_t, size_t>> a_and_b_of_every_projection(const LoraAdapters& ad,
                                                                        std::span<const int> layers) {
  std::vector<std::pair<size_t, size_t>> out;
  for (int il : layers)
    for (int p = 0; p < kLoraProjections; ++p) {
      const auto proj = LoraProj(p);
      const size_t a0 = size_t(ad.a(il, proj) - ad.params().data());
      const size_t b0 = size_t(ad.b(il, proj) - ad.params().data());
      out.emplace_back(a0, b0);
      out.emplace_back(b0, b0 + size_t(ad.rank()) * size_t(ad.out_dim(proj)));
    }
  return out;
}

struct GradientCheck {
  // kRandomSigns: a random +-1 vector over each range (every entry's gradient counts alike).
  // kAlongGradient: the analytic gradient over each range, whose derivative is the largest any
  // direction has, so it stands clear of the pass's float rounding even through thirty blocks.
  enum class Direction { kRandomSigns, kAlongGradient };
  Direction direction = Direction::kRandomSigns;
  double step = 5e-2;   // the step's L2 length along the (unit) direction
  double bound = 5e-3;  // on |analytic - numeric| / max(|analytic|, |numeric|)
  // > 0: the step is instead loss_change / |analytic derivative| (at most 1), so that each step moves
  // the loss by about as much, well above its rounding, however small the range's gradient.
  double loss_change = 0;
  // A range whose derivative is below floor * the largest range's is judged against that instead:
  // a near-zero gradient (a first block's K) is otherwise all rounding.
  double floor = 0;
};

// d loss / d t at t = 0 of loss(params + t * dir), by the five-point stencil (error O(h^4)), so the
// step can be large enough for the pass's float rounding to stay small beside the difference.
inline double numeric_derivative(const Model& model, const VerifyContext& ctx, const VerifyHead& head,
                                 LoraAdapters& ad, std::span<const float> dir, double h, double target,
                                 VerifyLoss loss, ThreadPool& pool) {
  const std::vector<float> keep(ad.params().begin(), ad.params().end());
  auto at = [&](double t) {
    for (size_t i = 0; i < keep.size(); ++i) ad.params()[i] = keep[i] + float(t * double(dir[i]));
    auto r = verify_pass(model, ctx, head, ad, target, loss, nullptr, pool);
    EXPECT_TRUE(r.ok());
    return r.ok() ? r->loss : 0.0;
  };
  const double d = (8.0 * (at(h) - at(-h)) - (at(2 * h) - at(-2 * h))) / (12.0 * h);
  std::copy(keep.begin(), keep.end(), ad.params().begin());
  return d;
}

// For each range, and for all parameters at once, the derivative along a unit direction over the
// range (GradientCheck::Direction) against the analytic gradient's projection on it (EXPECT within
// the bound); returns the largest relative error. Directions over whole tensors rather than single
// entries: their derivatives are large beside the pass's float rounding, and a wrong term in any
// projection's gradient still shows in its own range.
inline double check_adapter_gradient(const Model& model, const VerifyContext& ctx, const VerifyHead& head,
                                     LoraAdapters& ad, double target, VerifyLoss loss,
                                     std::vector<std::pair<size_t, size_t>> ranges, const GradientCheck& g,
                                     ThreadPool& pool) {
  LoraAdapters grad = ad.zeros_like();
  auto base = verify_pass(model, ctx, head, ad, target, loss, &grad, pool);
  EXPECT_TRUE(base.ok()) << base.error();
  if (!base.ok()) return 1.0;
  ranges.emplace_back(0, ad.params().size());
  double worst = 0;
  uint64_t st = 99;
  std::vector<std::vector<float>> dirs;
  std::vector<double> analytic(ranges.size(), 0.0);
  double largest = 0;
  for (size_t k = 0; k < ranges.size(); ++k) {
    const auto [begin, end] = ranges[k];
    std::vector<float>& dir = dirs.emplace_back(ad.params().size(), 0.0f);
    double norm2 = 0;
    for (size_t i = begin; i < end; ++i) {
      st = st * 6364136223846793005ull + 1442695040888963407ull;
      dir[i] = g.direction == GradientCheck::Direction::kAlongGradient ? grad.params()[i]
                                                                          : ((st >> 63) ? 1.0f : -1.0f);
      norm2 += double(dir[i]) * double(dir[i]);
    }
    if (norm2 == 0) continue;
    for (size_t i = begin; i < end; ++i) {
      dir[i] = float(double(dir[i]) / std::sqrt(norm2));
      analytic[k] += double(dir[i]) * double(grad.params()[i]);
    }
    largest = std::max(largest, std::abs(analytic[k]));
  }
  for (size_t k = 0; k < ranges.size(); ++k) {
    const auto [begin, end] = ranges[k];
    if (analytic[k] == 0) {
      ADD_FAILURE() << "parameters [" << begin << ", " << end << ") have no gradient to check";
      continue;
    }
    const double h = g.loss_change > 0 ? std::min(1.0, g.loss_change / std::abs(analytic[k])) : g.step;
    const double numeric = numeric_derivative(model, ctx, head, ad, dirs[k], h, target, loss, pool);
    const double rel = std::abs(numeric - analytic[k]) /
                       std::max({std::abs(numeric), std::abs(analytic[k]), g.floor * largest});
    worst = std::max(worst, rel);
    EXPECT_LT(rel, g.bound) << "parameters [" << begin << ", " << end << "): analytic " << analytic[k]
                            << ", numeric " << numeric;
  }
  return worst;
}

}  // namespace agentkv::prm::lora_check
