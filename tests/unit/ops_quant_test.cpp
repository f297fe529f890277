// Exact checks of the scalar conversions, hand-built quant blocks and the activation quantizers.
#include <gtest/gtest.h>

#include <algorithm>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "ops/cpu_features.h"
#include "ops/fp16.h"
#include "ops/quant.h"

namespace agentkv {
namespace {

void put16(std::vector<uint8_t>& b, size_t off, uint16_t v) { std::memcpy(b.data() + off, &v, 2); }

std::vector<float> deq(GgmlType t, const std::vector<uint8_t>& b, int64_t n) {
  std::vector<float> y(size_t(n), -999.0f);
  dequantize_row(t, b.data(), y.data(), n);
  return y;
}

TEST(Fp16, KnownValues) {
  EXPECT_EQ(fp16_to_f32(0x3C00), 1.0f);
  EXPECT_EQ(fp16_to_f32(0xC000), -2.0f);
  EXPECT_EQ(fp16_to_f32(0x7BFF), 65504.0f);
  EXPECT_EQ(fp16_to_f32(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(fp16_to_f32(0x03FF), std::ldexp(1023.0f, -24));
  EXPECT_EQ(fp16_to_f32(0x0400), std::ldexp(1.0f, -14));
  EXPECT_TRUE(std::signbit(fp16_to_f32(0x8000)));
  EXPECT_EQ(fp16_to_f32(0x7C00), std::numeric_limits<float>::infinity());
  EXPECT_EQ(fp16_to_f32(0xFC00), -std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(fp16_to_f32(0x7E00)));
  EXPECT_TRUE(std::isnan(fp16_to_f32(0x7C01)));
}

TEST(Fp16, RoundTripsEveryHalf) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float f = fp16_to_f32(uint16_t(h));
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(fp16_to_f32(f32_to_fp16(f)))) << h;
    } else {
      EXPECT_EQ(f32_to_fp16(f), h) << h;
    }
  }
}

TEST(Fp16, RoundsToNearestEven) {
  EXPECT_EQ(f32_to_fp16(1.0f + std::ldexp(1.0f, -11)), 0x3C00);      // tie -> even
  EXPECT_EQ(f32_to_fp16(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3C02);  // tie -> even (up)
  EXPECT_EQ(f32_to_fp16(1.0f + std::ldexp(1.0f, -11) + std::ldexp(1.0f, -20)), 0x3C01);
  EXPECT_EQ(f32_to_fp16(65519.0f), 0x7BFF);
  EXPECT_EQ(f32_to_fp16(65520.0f), 0x7C00);
  EXPECT_EQ(f32_to_fp16(1e30f), 0x7C00);
  EXPECT_EQ(f32_to_fp16(-1e30f), 0xFC00);
  EXPECT_EQ(f32_to_fp16(std::ldexp(1.0f, -25)), 0x0000);     // half of the smallest subnormal: tie
  EXPECT_EQ(f32_to_fp16(std::ldexp(3.0f, -25)), 0x0002);     // 1.5 ulp -> 2
  EXPECT_EQ(f32_to_fp16(-std::ldexp(5.0f, -26)), 0x8001);    // 1.25 ulp -> 1
  EXPECT_EQ(f32_to_fp16(std::ldexp(2047.0f, -25)), 0x0400);  // rounds up into the normals
  EXPECT_EQ(f32_to_fp16(std::ldexp(1.0f, -30)), 0x0000);
  const uint16_t nan = f32_to_fp16(std::numeric_limits<float>::quiet_NaN());
  EXPECT_EQ(nan & 0x7C00, 0x7C00);
  EXPECT_NE(nan & 0x03FF, 0);
}

TEST(Bf16, Conversions) {
  EXPECT_EQ(bf16_to_f32(0x3F80), 1.0f);
  EXPECT_EQ(bf16_to_f32(0xC000), -2.0f);
  EXPECT_EQ(bf16_to_f32(0x0001), std::ldexp(1.0f, -133));  // subnormal
  EXPECT_EQ(bf16_to_f32(0x7F80), std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(bf16_to_f32(0x7FC0)));
  EXPECT_EQ(f32_to_bf16(1.0f + std::ldexp(1.0f, -8)), 0x3F80);  // tie -> even
  EXPECT_EQ(f32_to_bf16(1.0f + std::ldexp(3.0f, -8)), 0x3F82);
  EXPECT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(std::numeric_limits<float>::quiet_NaN()))));
}

TEST(Dequant, FloatTypes) {
  std::vector<uint8_t> f16(4);
  put16(f16, 0, 0x3C00);
  put16(f16, 2, 0x0001);
  auto y = deq(GgmlType::F16, f16, 2);
  EXPECT_EQ(y[0], 1.0f);
  EXPECT_EQ(y[1], std::ldexp(1.0f, -24));
  std::vector<uint8_t> bf(4);
  put16(bf, 0, 0x3F80);
  put16(bf, 2, 0xC040);
  y = deq(GgmlType::BF16, bf, 2);
  EXPECT_EQ(y[0], 1.0f);
  EXPECT_EQ(y[1], -3.0f);
  std::vector<uint8_t> f32(8);
  const float v[2] = {1.5f, -0.25f};
  std::memcpy(f32.data(), v, 8);
  y = deq(GgmlType::F32, f32, 2);
  EXPECT_EQ(y[0], 1.5f);
  EXPECT_EQ(y[1], -0.25f);
}

// qs[j] = j | (15 - j) << 4: element j holds code j, element j + 16 holds 15 - j.
void fill_nibbles(std::vector<uint8_t>& b, size_t off) {
  for (int j = 0; j < 16; ++j) b[off + j] = uint8_t(j | ((15 - j) << 4));
}

TEST(Dequant, Q4_0) {
  std::vector<uint8_t> b(18);
  put16(b, 0, 0x3800);  // 0.5
  fill_nibbles(b, 2);
  auto y = deq(GgmlType::Q4_0, b, 32);
  EXPECT_EQ(y[0], -4.0f);   // (0 - 8) * 0.5
  EXPECT_EQ(y[15], 3.5f);   // (15 - 8) * 0.5
  EXPECT_EQ(y[16], 3.5f);   // (15 - 8) * 0.5
  EXPECT_EQ(y[31], -4.0f);  // (0 - 8) * 0.5
  EXPECT_EQ(y[9], 0.5f);
}

TEST(Dequant, Q4_1) {
  std::vector<uint8_t> b(20);
  put16(b, 0, 0x3800);  // d 0.5
  put16(b, 2, 0xBC00);  // m -1
  fill_nibbles(b, 4);
  auto y = deq(GgmlType::Q4_1, b, 32);
  EXPECT_EQ(y[0], -1.0f);
  EXPECT_EQ(y[3], 0.5f);
  EXPECT_EQ(y[16], 6.5f);  // 15 * 0.5 - 1
  EXPECT_EQ(y[31], -1.0f);
}

TEST(Dequant, Q5_0AndQ5_1) {
  std::vector<uint8_t> b(22);
  put16(b, 0, 0x4000);              // d 2
  const uint32_t qh = 0x80000001u;  // high bit of element 0 and element 31
  std::memcpy(b.data() + 2, &qh, 4);
  fill_nibbles(b, 6);
  auto y = deq(GgmlType::Q5_0, b, 32);
  EXPECT_EQ(y[0], 0.0f);    // (0|16 - 16) * 2
  EXPECT_EQ(y[1], -30.0f);  // (1 - 16) * 2
  EXPECT_EQ(y[16], -2.0f);  // (15 - 16) * 2
  EXPECT_EQ(y[31], 0.0f);   // (0|16 - 16) * 2
  std::vector<uint8_t> b1(24);
  put16(b1, 0, 0x4000);  // d 2
  put16(b1, 2, 0x3C00);  // m 1
  std::memcpy(b1.data() + 4, &qh, 4);
  fill_nibbles(b1, 8);
  y = deq(GgmlType::Q5_1, b1, 32);
  EXPECT_EQ(y[0], 33.0f);   // 16 * 2 + 1
  EXPECT_EQ(y[1], 3.0f);    // 1 * 2 + 1
  EXPECT_EQ(y[16], 31.0f);  // 15 * 2 + 1
  EXPECT_EQ(y[31], 33.0f);
}

TEST(Dequant, Q8_0) {
  std::vector<uint8_t> b(34);
  put16(b, 0, 0x3400);  // 0.25
  for (int j = 0; j < 32; ++j) b[2 + j] = uint8_t(int8_t(j - 16));
  auto y = deq(GgmlType::Q8_0, b, 32);
  for (int j = 0; j < 32; ++j) EXPECT_EQ(y[j], float(j - 16) * 0.25f);
}

// Sub-block 0 uses the j < 4 packing, sub-block 4 the j >= 4 packing (high bits from bytes 0 / 4).
void fill_k_scales(std::vector<uint8_t>& b) {
  put16(b, 0, 0x3C00);      // d 1
  put16(b, 2, 0x3800);      // dmin 0.5
  b[4 + 0] = 1 | (1 << 6);  // sc0 = 1; bits 4..5 of sc4 = 1
  b[4 + 4] = 2;             // m0 = 2
  b[4 + 8] = 3 | (4 << 4);  // sc4 low = 3, m4 low = 4
}

TEST(Dequant, Q4_K) {
  std::vector<uint8_t> b(144);
  fill_k_scales(b);
  for (int l = 0; l < 128; ++l) b[16 + l] = 5 | (6 << 4);
  auto y = deq(GgmlType::Q4_K, b, 256);
  EXPECT_EQ(y[0], 4.0f);  // 1 * 1 * 5 - 0.5 * 2
  EXPECT_EQ(y[31], 4.0f);
  EXPECT_EQ(y[32], 0.0f);    // sc1 = m1 = 0
  EXPECT_EQ(y[128], 93.0f);  // sc4 = 3 | 16 = 19: 19 * 5 - 0.5 * 4
  EXPECT_EQ(y[160], 0.0f);
}

TEST(Dequant, Q5_K) {
  std::vector<uint8_t> b(176);
  fill_k_scales(b);
  b[16 + 0] = 0x01;  // element 0 (group 0, low half) high bit
  b[16 + 3] = 0x10;  // element 128 + 3 (group 2, low half: bit 4)
  b[16 + 5] = 0x02;  // element 32 + 5 (group 0, high half: bit 1), scale 0 there
  for (int l = 0; l < 128; ++l) b[48 + l] = 5 | (6 << 4);
  auto y = deq(GgmlType::Q5_K, b, 256);
  EXPECT_EQ(y[0], 20.0f);  // 1 * (5 + 16) - 1
  EXPECT_EQ(y[1], 4.0f);
  EXPECT_EQ(y[128 + 3], 397.0f);  // 19 * (5 + 16) - 2
  EXPECT_EQ(y[128 + 4], 93.0f);
  EXPECT_EQ(y[37], 0.0f);
}

TEST(Dequant, Q6_K) {
  std::vector<uint8_t> b(210);
  for (int l = 0; l < 128; ++l) b[l] = 0x21;  // low nibble 1, high nibble 2
  b[128 + 0] = 0x03;                          // element 0: bits 4..5 = 3
  for (int i = 0; i < 16; ++i) b[192 + i] = 1;
  b[192 + 0] = 2;
  b[192 + 2] = 0xFF;      // -1
  put16(b, 208, 0x3800);  // d 0.5
  auto y = deq(GgmlType::Q6_K, b, 256);
  EXPECT_EQ(y[0], 17.0f);     // 0.5 * 2 * ((1 | 48) - 32)
  EXPECT_EQ(y[1], -31.0f);    // 0.5 * 2 * (1 - 32)
  EXPECT_EQ(y[32], 15.5f);    // 0.5 * -1 * (1 - 32)
  EXPECT_EQ(y[64], -15.0f);   // 0.5 * 1 * (2 - 32)
  EXPECT_EQ(y[128], -15.5f);  // second half, scale 8 = 1
  EXPECT_EQ(y[255], -15.0f);
}

TEST(Quantize, Q8_0RoundsHalfEvenAndStoresHalfScale) {
  std::vector<float> x(32, 0.0f);
  x[0] = 127.0f;  // d = 1
  x[1] = 2.5f;    // tie -> 2
  x[2] = -3.5f;   // tie -> -4
  x[3] = 0.49f;
  std::vector<uint8_t> q(34);
  quantize_row_q8_0(x.data(), q.data(), 32);
  EXPECT_EQ(load_fp16(q.data()), 1.0f);
  EXPECT_EQ(int8_t(q[2]), 127);
  EXPECT_EQ(int8_t(q[3]), 2);
  EXPECT_EQ(int8_t(q[4]), -4);
  EXPECT_EQ(int8_t(q[5]), 0);
  std::vector<float> back(32);
  dequantize_row(GgmlType::Q8_0, q.data(), back.data(), 32);
  for (int j = 0; j < 32; ++j) EXPECT_NEAR(back[j], x[j], 0.5f);
}

TEST(Quantize, Q8_1StoresScaledSum) {
  std::vector<float> x(32, 1.0f);
  x[0] = 127.0f;
  std::vector<uint8_t> q(36);
  quantize_row_q8_1(x.data(), q.data(), 32);
  EXPECT_EQ(load_fp16(q.data()), 1.0f);
  EXPECT_EQ(load_fp16(q.data() + 2), 158.0f);  // 127 + 31 * 1
}

// ggml's quantize_row_q8_1_ref, written out plainly: the vectorized quantizer must give the same
// codes, scale and scaled sum for every block, ties, zeros, denormals and huge values included.
TEST(Quantize, Q8_1EqualsThePlainDefinitionOnRandomAndEdgeBlocks) {
  std::mt19937 rng(7);
  std::normal_distribution<float> g(0.0f, 1.0f);
  std::vector<float> x(32 * 64);
  for (auto& v : x) v = g(rng) * std::exp2(float(int(rng() % 40) - 20));
  for (int j = 0; j < 32; ++j) {
    x[size_t(j)] = 0.0f;                                 // all zero
    x[32 + size_t(j)] = float(j) - 15.5f;                // ties at d = 16.5 / 127 ... scaled
    x[64 + size_t(j)] = (j % 2 ? -1 : 1) * 1e-40f;       // denormals
    x[96 + size_t(j)] = (j % 3 ? 3e38f : -3e38f) / float(j + 1);  // near the top of float
    x[128 + size_t(j)] = j == 7 ? -0.0f : 0.0f;          // negative zero
  }
  std::vector<uint8_t> q(36 * 64);
  quantize_row_q8_1(x.data(), q.data(), int64_t(x.size()));
  for (size_t b = 0; b < 64; ++b) {
    const float* xb = x.data() + 32 * b;
    float amax = 0.0f;
    for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(xb[j]));
    const float d = amax / 127.0f, id = amax != 0.0f ? 127.0f / amax : 0.0f;
    int sum = 0;
    for (int j = 0; j < 32; ++j) {
      // ggml's nearest_int: half to even through 1.5 * 2^23, then int8 truncation (only a block whose
      // 127 / amax overflows, the denormal one, leaves the int8 range).
      const float t = xb[j] * id + 12582912.0f;
      int32_t bits;
      std::memcpy(&bits, &t, 4);
      const int v = int8_t((bits & 0x007FFFFF) - 0x00400000);
      if (std::isfinite(id)) {
        ASSERT_EQ(float(v), std::nearbyint(xb[j] * id)) << "block " << b;
      }
      ASSERT_EQ(int(int8_t(q[36 * b + 4 + size_t(j)])), v) << "block " << b << " element " << j;
      sum += v;
    }
    ASSERT_EQ(load_fp16(q.data() + 36 * b), fp16_to_f32(f32_to_fp16(d))) << "block " << b;
    ASSERT_EQ(load_fp16(q.data() + 36 * b + 2), fp16_to_f32(f32_to_fp16(d * float(sum)))) << "block " << b;
  }
}

TEST(Quantize, Q8_KUsesSignedMaxAndBsums) {
  std::vector<float> x(256, 0.0f);
  x[5] = 254.0f;  // ggml maps the largest-magnitude value to -127, so d = -2 here
  x[6] = 10.0f;
  x[20] = 3.0f;  // 3 / -2 = -1.5 -> -2 (half even)
  std::vector<uint8_t> q(292);
  quantize_row_q8_K(x.data(), q.data(), 256);
  float d;
  std::memcpy(&d, q.data(), 4);
  EXPECT_EQ(d, -2.0f);
  EXPECT_EQ(int8_t(q[4 + 5]), -127);
  EXPECT_EQ(int8_t(q[4 + 6]), -5);
  EXPECT_EQ(int8_t(q[4 + 20]), -2);
  int16_t bs[16];
  std::memcpy(bs, q.data() + 260, sizeof bs);
  EXPECT_EQ(bs[0], -132);
  EXPECT_EQ(bs[1], -2);
  EXPECT_EQ(bs[2], 0);
}

TEST(CpuFeatures, NamesAndClamp) {
  EXPECT_STREQ(isa_level_name(IsaLevel::kScalar), "scalar");
  EXPECT_STREQ(isa_level_name(IsaLevel::kAvx2), "avx2");
  EXPECT_STREQ(isa_level_name(IsaLevel::kAvx512), "avx512");
  EXPECT_STREQ(isa_level_name(IsaLevel::kAvx512Vnni), "avx512vnni");
  const IsaLevel before = active_isa_level();
  EXPECT_EQ(set_isa_level_for_testing(IsaLevel::kScalar), IsaLevel::kScalar);
  EXPECT_STREQ(active_isa_name(), "scalar");
  EXPECT_EQ(set_isa_level_for_testing(IsaLevel::kAvx512Vnni), detected_isa_level());
  EXPECT_EQ(int(set_isa_level_for_testing(IsaLevel::kAvx512)), std::min(int(IsaLevel::kAvx512), int(detected_isa_level())));
  set_isa_level_for_testing(before);
}

}  // namespace
}  // namespace agentkv
