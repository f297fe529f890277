// The places where agentkv deliberately mirrors llama.cpp's reduced-precision arithmetic: the f16 KV
// cache, f16 q and softmax weights in attention, and GELU evaluated at f16 precision.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "ops/attention.h"
#include "ops/fp16.h"
#include "ops/norm.h"

namespace agentkv {
namespace {

TEST(LlamaNumerics, KvStoreRoundsThroughFp16) {
  const std::vector<float> src = {1.0f, 0.1f, -3.14159f, 1e-6f, 70000.0f, 65504.0f};
  std::vector<kv_t> stored(src.size());
  std::vector<float> dst(src.size());
  kv_store(stored.data(), src.data(), int(src.size()));
  kv_load(dst.data(), stored.data(), int(src.size()));
  EXPECT_EQ(dst[0], 1.0f);
  EXPECT_EQ(dst[1], 0.0999755859375f);  // nearest binary16 to 0.1
  EXPECT_EQ(dst[2], -3.140625f);
  EXPECT_EQ(dst[3], fp16_to_f32(f32_to_fp16(1e-6f)));  // subnormal in f16
  EXPECT_TRUE(std::isinf(dst[4]));
  EXPECT_EQ(dst[5], 65504.0f);
}

TEST(LlamaNumerics, GeluIsEvaluatedAtFp16) {
  const std::vector<float> g = {-12.0f, -0.3f, 0.1f, 0.7001f, 2.5f, 11.0f};
  std::vector<float> gate = g, up(g.size(), 2.0f);
  gelu_tanh_mul(gate.data(), up.data(), int64_t(g.size()));
  EXPECT_EQ(gate[0], 0.0f);   // x <= -10: 0
  EXPECT_EQ(gate[5], 22.0f);  // x >= 10: x * up
  for (size_t i = 1; i < 5; ++i) {
    const float h = round_through_fp16(g[i]);
    const float t = std::tanh(0.7978845608028654f * h * (1.0f + 0.044715f * h * h));
    const float v = round_through_fp16(0.5f * h * (1.0f + t));
    EXPECT_EQ(gate[i], v * 2.0f) << i;
    EXPECT_EQ(gate[i] / 2.0f, round_through_fp16(gate[i] / 2.0f)) << "gelu part not an f16 value";
    EXPECT_NEAR(gate[i], 2.0f * 0.5f * g[i] * (1.0f + std::erf(g[i] / std::sqrt(2.0f))), 2e-2f);
  }
}

// One key/value: the output is V exactly as stored (f16-rounded), whatever q is.
TEST(LlamaNumerics, SingleSlotAttentionReturnsStoredV) {
  constexpr int kDim = 8;
  std::vector<kv_t> arena(2 * kDim);
  PagedKvLayer l;
  l.base = arena.data();
  l.block_stride = 2 * kDim;
  l.v_offset = kDim;
  l.block_size = 1;
  l.kv_dim = kDim;
  std::vector<float> k(kDim), v(kDim), q(kDim, 0.37f);
  for (int i = 0; i < kDim; ++i) k[i] = 0.1f * float(i + 1), v[i] = 1.0f / float(i + 3);
  kv_store(l.k(0, 0), k.data(), kDim);
  kv_store(l.v(0, 0), v.data(), kDim);
  const int32_t table[1] = {0};
  float out[kDim], scratch[1];
  attend_group(q.data(), 1, l, table, 0, 0, 0, kDim, 0.125f, out, scratch);
  for (int i = 0; i < kDim; ++i) EXPECT_EQ(out[i], round_through_fp16(v[i])) << i;
}

}  // namespace
}  // namespace agentkv
