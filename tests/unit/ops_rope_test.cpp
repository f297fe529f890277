// RoPE's attention factor (LongRoPE's rope.scaling.attn_factor): apply scales what it rotates by it,
// as ggml scales cos and sin; unapply undoes apply; shift moves already-rotated K between positions
// without scaling it again (a second factor would compound on every move). A RopeTable rotates by
// the same bits as apply / unapply.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "ops/rope.h"

namespace agentkv {
namespace {

constexpr int kHeadDim = 16, kHeads = 2;

std::vector<float> sample() {
  std::vector<float> x(kHeadDim * kHeads);
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.7f * float(i) + 0.3f);
  return x;
}

Rope rope(float attn_factor) {
  return Rope(kHeadDim, kHeadDim, 10000.0f, RopeStyle::kNeox, {1, 2, 3, 4, 5, 6, 7, 8}, 1.0f, attn_factor);
}

void expect_near(const std::vector<float>& a, const std::vector<float>& b, float tol) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], tol) << i;
}

TEST(Rope, AttentionFactorScalesTheRotatedVector) {
  std::vector<float> plain = sample(), scaled = sample();
  rope(1.0f).apply(plain.data(), kHeads, 37);
  rope(1.5f).apply(scaled.data(), kHeads, 37);
  for (float& v : plain) v *= 1.5f;
  expect_near(scaled, plain, 1e-5f);
}

TEST(Rope, UnapplyUndoesApplyWithTheFactor) {
  const Rope r = rope(1.17f);
  std::vector<float> x = sample();
  r.apply(x.data(), kHeads, 300);
  r.unapply(x.data(), kHeads, 300);
  expect_near(x, sample(), 1e-5f);
}

TEST(Rope, ShiftMovesRotatedKWithoutScalingAgain) {
  const Rope r = rope(1.17f);
  std::vector<float> moved = sample(), direct = sample();
  r.apply(moved.data(), kHeads, 100);
  r.shift(moved.data(), kHeads, 27);
  r.apply(direct.data(), kHeads, 127);
  expect_near(moved, direct, 1e-4f);
}

TEST(Rope, TableRotatesExactlyAsApplyAndUnapply) {
  const Rope ropes[] = {rope(1.17f), Rope(kHeadDim, kHeadDim, 10000.0f, RopeStyle::kNorm),
                        Rope(kHeadDim, kHeadDim / 2, 1e6f, RopeStyle::kNeox, {}, 0.25f)};
  for (const Rope& r : ropes)
    for (RopeTable::Direction d : {RopeTable::Direction::kApply, RopeTable::Direction::kUnapply}) {
      const RopeTable table(r, d, 4100);
      for (int64_t pos : {0, 1, 37, 1023, 4099}) {
        std::vector<float> by_table = sample(), direct = sample();
        table.rotate(by_table.data(), kHeads, pos);
        if (d == RopeTable::Direction::kApply)
          r.apply(direct.data(), kHeads, pos);
        else
          r.unapply(direct.data(), kHeads, pos);
        for (size_t i = 0; i < direct.size(); ++i) ASSERT_EQ(by_table[i], direct[i]) << "pos " << pos << " at " << i;
      }
    }
}

}  // namespace
}  // namespace agentkv
