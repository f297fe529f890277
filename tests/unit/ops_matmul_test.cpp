// matmul on random (valid) blocks of every supported type: each SIMD level against the scalar
// kernels, and the quantized-activation path against dequantize + f32 dot.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "ops/cpu_features.h"
#include "ops/fp16.h"
#include "ops/matmul.h"
#include "ops/quant.h"

namespace agentkv {
namespace {

const GgmlType kTypes[] = {GgmlType::F32,  GgmlType::F16,  GgmlType::BF16, GgmlType::Q4_0,
                           GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1, GgmlType::Q8_0,
                           GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K};

int block_elems(GgmlType t) { return ggml_type_info(uint32_t(t))->block_elems; }

// Byte offsets of the binary16 scale fields in a block; every other byte may be anything.
std::vector<int> half_fields(GgmlType t) {
  switch (t) {
    case GgmlType::Q4_0:
    case GgmlType::Q5_0:
    case GgmlType::Q8_0:
      return {0};
    case GgmlType::Q4_1:
    case GgmlType::Q5_1:
    case GgmlType::Q4_K:
    case GgmlType::Q5_K:
      return {0, 2};
    case GgmlType::Q6_K:
      return {208};
    default:
      return {};
  }
}

// Random bytes with finite scales are valid blocks for every quant type.
std::vector<uint8_t> random_weights(GgmlType t, int64_t rows, int64_t cols, std::mt19937& rng) {
  const size_t rb = type_row_bytes(t, cols);
  std::vector<uint8_t> w(rb * size_t(rows));
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::uniform_int_distribution<int> byte(0, 255);
  if (t == GgmlType::F32 || t == GgmlType::F16 || t == GgmlType::BF16) {
    for (int64_t i = 0; i < rows * cols; ++i) {
      const float v = u(rng);
      if (t == GgmlType::F32) {
        std::memcpy(w.data() + 4 * i, &v, 4);
      } else {
        const uint16_t h = t == GgmlType::F16 ? f32_to_fp16(v) : f32_to_bf16(v);
        std::memcpy(w.data() + 2 * i, &h, 2);
      }
    }
    return w;
  }
  for (auto& b : w) b = uint8_t(byte(rng));
  const int bb = ggml_type_info(uint32_t(t))->block_bytes;
  // K-quant codes reach 63 * 63, so their super-block scales are kept smaller.
  const float scale = block_elems(t) == 256 ? 0.002f : 0.05f;
  for (size_t off = 0; off < w.size(); off += size_t(bb))
    for (int f : half_fields(t)) {
      const uint16_t h = f32_to_fp16(u(rng) * scale);
      std::memcpy(w.data() + off + f, &h, 2);
    }
  return w;
}

std::vector<float> random_acts(int64_t n, std::mt19937& rng) {
  std::normal_distribution<float> g(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(n));
  for (auto& v : x) v = g(rng);
  return x;
}

struct MatmulCase {
  GgmlType type;
  int64_t rows, cols, n_tokens;
  int threads;
};

struct Data {
  std::vector<uint8_t> w;
  std::vector<float> x, wf;  // wf: dequantized weights
  WeightView view;
};

Data make_data(const MatmulCase& c, uint32_t seed) {
  std::mt19937 rng(seed);
  Data d;
  d.w = random_weights(c.type, c.rows, c.cols, rng);
  d.x = random_acts(c.cols * c.n_tokens, rng);
  const size_t rb = type_row_bytes(c.type, c.cols);
  d.wf.resize(size_t(c.rows * c.cols));
  for (int64_t r = 0; r < c.rows; ++r)
    dequantize_row(c.type, d.w.data() + rb * r, d.wf.data() + r * c.cols, c.cols);
  d.view = WeightView{c.type, c.cols, c.rows, d.w.data(), rb};
  return d;
}

std::vector<float> run_at(IsaLevel level, const Data& d, const MatmulCase& c) {
  EXPECT_EQ(set_isa_level_for_testing(level), level);
  ThreadPool pool(c.threads);
  std::vector<float> y(size_t(c.rows * c.n_tokens), std::nanf(""));
  matmul(d.view, d.x.data(), c.n_tokens, y.data(), pool);
  return y;
}

std::vector<IsaLevel> simd_levels() {
  std::vector<IsaLevel> out;
  if (int(detected_isa_level()) >= int(IsaLevel::kAvx2)) out.push_back(IsaLevel::kAvx2);
  if (int(detected_isa_level()) >= int(IsaLevel::kAvx512)) out.push_back(IsaLevel::kAvx512);
  if (int(detected_isa_level()) >= int(IsaLevel::kAvx512Vnni)) out.push_back(IsaLevel::kAvx512Vnni);
  return out;
}

std::string name(const MatmulCase& c) {
  return std::string(ggml_type_info(uint32_t(c.type))->name) + " rows=" + std::to_string(c.rows) +
         " cols=" + std::to_string(c.cols) + " tokens=" + std::to_string(c.n_tokens) +
         " threads=" + std::to_string(c.threads);
}

// sum_c |W[r][c] * x[t][c]|: the scale float reordering errors are measured against.
double abs_terms(const Data& d, const MatmulCase& c, int64_t r, int64_t t) {
  double s = 0;
  for (int64_t k = 0; k < c.cols; ++k) s += std::fabs(double(d.wf[r * c.cols + k]) * d.x[t * c.cols + k]);
  return s;
}

void check_case(const MatmulCase& c, uint32_t seed) {
  SCOPED_TRACE(name(c));
  const Data d = make_data(c, seed);
  const IsaLevel saved = active_isa_level();
  const std::vector<float> ref = run_at(IsaLevel::kScalar, d, c);
  const int be = block_elems(c.type) == 1 ? 32 : block_elems(c.type);
  const bool int8_acts = block_elems(c.type) > 1;
  for (int64_t t = 0; t < c.n_tokens; ++t) {
    // Per-element bound of the activation quantization error: half a step of amax/127, plus the
    // step's own binary16 rounding (127 * 2^-11 of a step).
    std::vector<double> step(size_t(c.cols), 0.0);
    for (int64_t b = 0; int8_acts && b < c.cols / be; ++b) {
      float amax = 0;
      for (int k = 0; k < be; ++k) amax = std::max(amax, std::fabs(d.x[t * c.cols + b * be + k]));
      for (int k = 0; k < be; ++k) step[b * be + k] = amax / 127.0 * (0.5 + 127.0 / 2048.0);
    }
    for (int64_t r = 0; r < c.rows; ++r) {
      double exact = 0, qbound = 0;
      for (int64_t k = 0; k < c.cols; ++k) {
        exact += double(d.wf[r * c.cols + k]) * d.x[t * c.cols + k];
        qbound += std::fabs(d.wf[r * c.cols + k]) * step[k];
      }
      const double terms = abs_terms(d, c, r, t);
      // (c) 8-bit (or f16/bf16) activations: the bound above, plus 2^-8 relative slack for the
      // rounded activation scales / sums (bf16 activations need 2^-9).
      const double tol_q = qbound + terms / 256.0 + 1e-6;
      ASSERT_NEAR(ref[t * c.rows + r], exact, tol_q) << "vs f32 at t=" << t << " r=" << r;
    }
  }
  // (b) Integer block dots are exact; only float accumulation order may differ.
  for (IsaLevel level : simd_levels()) {
    SCOPED_TRACE(isa_level_name(level));
    const std::vector<float> got = run_at(level, d, c);
    for (int64_t t = 0; t < c.n_tokens; ++t)
      for (int64_t r = 0; r < c.rows; ++r) {
        const double tol = 1e-5 * abs_terms(d, c, r, t) + 1e-7;
        ASSERT_NEAR(got[t * c.rows + r], ref[t * c.rows + r], tol) << "t=" << t << " r=" << r;
      }
  }
  set_isa_level_for_testing(saved);
}

TEST(Matmul, EveryTypeDecodeAndPrefill) {
  uint32_t seed = 1;
  for (GgmlType t : kTypes) {
    const int64_t cols = block_elems(t) == 256 ? 512 : 96;
    check_case({t, 37, cols, 1, 2}, seed++);
    check_case({t, 24, cols, 8, 2}, seed++);
  }
}

TEST(Matmul, OddShapesAndThreadCounts) {
  uint32_t seed = 100;
  for (GgmlType t : kTypes) {
    const int64_t cols = block_elems(t) == 256 ? 256 : 64;
    for (int64_t n_tokens : {1, 2, 3, 5, 17})
      for (int64_t rows : {1, 3, 6, 13})
        for (int threads : {1, 2, 3}) check_case({t, rows, cols, n_tokens, threads}, seed++);
  }
}

TEST(Matmul, ModelShapes) {
  uint32_t seed = 1000;
  check_case({GgmlType::Q4_1, 192, 576, 7, 2}, seed++);
  check_case({GgmlType::Q5_0, 256, 640, 5, 2}, seed++);
  check_case({GgmlType::Q4_K, 67, 1024, 9, 3}, seed++);
  check_case({GgmlType::Q6_K, 70, 2048, 4, 2}, seed++);
  check_case({GgmlType::Q8_0, 300, 640, 1, 2}, seed++);
  check_case({GgmlType::Q8_0, 130, 576, 70, 2}, seed++);
}

TEST(Matmul, RowsSliceMatchesFull) {
  const MatmulCase c{GgmlType::Q8_0, 50, 128, 3, 2};
  const Data d = make_data(c, 7);
  ThreadPool pool(2);
  std::vector<float> full(size_t(c.rows * c.n_tokens)), part(size_t(20 * c.n_tokens));
  matmul(d.view, d.x.data(), c.n_tokens, full.data(), pool);
  matmul_rows(d.view, d.x.data(), c.n_tokens, 13, 33, part.data(), pool);
  for (int64_t t = 0; t < c.n_tokens; ++t)
    for (int64_t r = 13; r < 33; ++r) EXPECT_EQ(part[t * 20 + (r - 13)], full[t * c.rows + r]);
}

// Batch-invariant mode: a token's output is bit-identical whatever else shares the call, for tile
// tokens and panel tokens alike (the serving engine relies on it: batched == one at a time).
TEST(Matmul, SplitModeIsBatchInvariant) {
  uint32_t seed = 5000;
  for (IsaLevel level : simd_levels()) {
    set_isa_level_for_testing(level);
    for (GgmlType t : kTypes) {
      for (int64_t rows : {13, 64, 200}) {
        const int64_t cols = block_elems(t) == 256 ? 512 : 160;
        const MatmulCase c{t, rows, cols, 37, 2};
        const Data d = make_data(c, seed++);
        ThreadPool pool(2);
        for (int64_t n_tile : {0, 1, 5, 18, 37}) {
          std::vector<float> all(size_t(rows * c.n_tokens));
          matmul(d.view, d.x.data(), c.n_tokens, all.data(), pool, n_tile);
          for (int64_t tok = 0; tok < c.n_tokens; ++tok) {
            // The same token alone, on the same path.
            std::vector<float> one(static_cast<size_t>(rows));
            matmul(d.view, d.x.data() + tok * cols, 1, one.data(), pool, tok < n_tile ? 1 : 0);
            for (int64_t r = 0; r < rows; ++r)
              ASSERT_EQ(one[size_t(r)], all[size_t(tok * rows + r)])
                  << "type " << int(t) << " rows " << rows << " n_tile " << n_tile << " token " << tok
                  << " row " << r;
          }
          // And in a batch of 3 at another offset, when the whole call took one path.
          if (n_tile == 0 || n_tile == c.n_tokens) {
            std::vector<float> three(static_cast<size_t>(rows * 3));
            matmul(d.view, d.x.data() + cols, 3, three.data(), pool, n_tile == 0 ? 0 : 3);
            for (int64_t k = 0; k < 3; ++k)
              for (int64_t r = 0; r < rows; ++r) {
                ASSERT_EQ(three[size_t(k * rows + r)], all[size_t((1 + k) * rows + r)]);
              }
          }
        }
      }
    }
  }
  set_isa_level_for_testing(detected_isa_level());
}

// Float weights give the same bits at every SIMD level: AVX-512's wide tiles (two tokens per
// 512-bit vector, the transfer maps' projection) run each token through the 256-bit tile's FMA chain.
TEST(Matmul, FloatWeightsBitIdenticalAcrossSimdLevels) {
  const std::vector<IsaLevel> levels = simd_levels();
  if (levels.size() < 2) GTEST_SKIP() << "one SIMD level on this machine";
  uint32_t seed = 6000;
  for (GgmlType t : {GgmlType::F32, GgmlType::F16, GgmlType::BF16})
    for (int64_t n_tokens : {2, 7, 8, 9, 37})
      for (int64_t cols : {64, 163, 513}) {
        const MatmulCase c{t, 29, cols, n_tokens, 2};
        SCOPED_TRACE(name(c));
        const Data d = make_data(c, seed++);
        const std::vector<float> ref = run_at(levels.front(), d, c);
        for (size_t i = 1; i < levels.size(); ++i) {
          const std::vector<float> got = run_at(levels[i], d, c);
          for (size_t k = 0; k < ref.size(); ++k) ASSERT_EQ(got[k], ref[k]) << isa_level_name(levels[i]) << " at " << k;
        }
      }
  set_isa_level_for_testing(detected_isa_level());
}

TEST(Matmul, ZeroActivationsGiveZero) {
  for (GgmlType t : kTypes) {
    const MatmulCase c{t, 5, block_elems(t) == 256 ? 256 : 32, 2, 1};
    Data d = make_data(c, 3);
    std::fill(d.x.begin(), d.x.end(), 0.0f);
    ThreadPool pool(1);
    std::vector<float> y(10, 1.0f);
    matmul(d.view, d.x.data(), c.n_tokens, y.data(), pool);
    for (float v : y) EXPECT_EQ(v, 0.0f);
  }
}

}  // namespace
}  // namespace agentkv
