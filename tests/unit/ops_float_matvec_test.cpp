// The training pass's plain-float matvecs (ops/float_matvec.h): each output against a reference
// written here (dequantize the row, sum in double in column order), bit for bit, for one vector and
// for several at once, over a row count that leaves a remainder after the four-row tiles, and for
// every pool size; the transposed product likewise, its rows summed in fixed chunks of 64.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "ops/float_matvec.h"
#include "ops/quant.h"
#include "util/thread_pool.h"

namespace agentkv {
namespace {

struct QuantMatrix {
  int64_t rows, cols;
  std::vector<uint8_t> bytes;
  WeightView view() const {
    return WeightView{GgmlType::Q8_0, cols, rows, bytes.data(), type_row_bytes(GgmlType::Q8_0, cols)};
  }
};

QuantMatrix random_q8_0(int64_t rows, int64_t cols, uint32_t seed) {
  QuantMatrix m{rows, cols, std::vector<uint8_t>(size_t(rows) * type_row_bytes(GgmlType::Q8_0, cols))};
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> row(static_cast<size_t>(cols));
  for (int64_t r = 0; r < rows; ++r) {
    for (float& v : row) v = nd(rng);
    quantize_row_q8_0(row.data(), m.bytes.data() + size_t(r) * type_row_bytes(GgmlType::Q8_0, cols), cols);
  }
  return m;
}

std::vector<float> random_vector(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = nd(rng);
  return v;
}

std::vector<float> dequantized(const QuantMatrix& m) {
  std::vector<float> w(size_t(m.rows * m.cols));
  const WeightView v = m.view();
  for (int64_t r = 0; r < m.rows; ++r)
    dequantize_row(v.type, m.bytes.data() + size_t(r) * v.row_bytes, w.data() + r * m.cols, m.cols);
  return w;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// 135 rows: two tasks of 64 and a last of 7 (one four-row tile and a remainder of three).
constexpr int64_t kRows = 135, kCols = 96;

TEST(FloatMatvec, EveryVectorOfABatchEqualsItsOwnColumnOrderSumBitForBit) {
  const QuantMatrix m = random_q8_0(kRows, kCols, 5);
  const std::vector<float> w = dequantized(m);
  std::vector<std::vector<float>> xs;
  for (uint32_t s = 0; s < 5; ++s) xs.push_back(random_vector(kCols, 100 + s));
  std::vector<std::vector<float>> want(xs.size(), std::vector<float>(size_t(kRows)));
  for (size_t v = 0; v < xs.size(); ++v)
    for (int64_t r = 0; r < kRows; ++r) {
      double s = 0;
      for (int64_t c = 0; c < kCols; ++c) s += double(w[size_t(r * kCols + c)]) * double(xs[v][size_t(c)]);
      want[v][size_t(r)] = float(s);
    }
  for (int threads : {1, 3}) {
    ThreadPool pool(threads);
    std::vector<std::vector<float>> ys(xs.size(), std::vector<float>(size_t(kRows)));
    std::vector<const float*> in;
    std::vector<float*> out;
    for (size_t v = 0; v < xs.size(); ++v) {
      in.push_back(xs[v].data());
      out.push_back(ys[v].data());
    }
    matvec_f32_many(m.view(), in, 0, kRows, out, pool);
    for (size_t v = 0; v < xs.size(); ++v) {
      EXPECT_TRUE(same_bits(ys[v], want[v])) << "vector " << v << ", " << threads << " threads";
      std::vector<float> one(static_cast<size_t>(kRows));
      matvec_f32(m.view(), xs[v].data(), one.data(), pool);
      EXPECT_TRUE(same_bits(one, want[v])) << "vector " << v << " alone, " << threads << " threads";
    }
    // A row range: rows [5, 130) only.
    std::vector<float> part(125);
    matvec_f32(m.view(), xs[0].data(), 5, 130, part.data(), pool);
    EXPECT_TRUE(same_bits(part, std::vector<float>(want[0].begin() + 5, want[0].begin() + 130)));
  }
}

TEST(FloatMatvec, TransposedProductOfABatchEqualsEachVectorAloneBitForBit) {
  const QuantMatrix m = random_q8_0(kRows, kCols, 6);
  std::vector<std::vector<float>> dys;
  for (uint32_t s = 0; s < 4; ++s) dys.push_back(random_vector(kRows, 200 + s));
  dys[2][7] = 0.0f;  // a row skipped by one vector and not by the others
  std::vector<std::vector<float>> alone(dys.size(), random_vector(kCols, 300));  // dx is added into
  ThreadPool one_thread(1);
  for (size_t v = 0; v < dys.size(); ++v) matvec_transposed_add_f32(m.view(), dys[v].data(), alone[v].data(), one_thread);
  // The reference, written out: partial sums over fixed chunks of 64 rows, added in chunk order.
  const std::vector<float> w = dequantized(m);
  for (size_t v = 0; v < dys.size(); ++v) {
    std::vector<float> want = random_vector(kCols, 300);
    for (int64_t c = 0; c < kCols; ++c) {
      double s = 0;
      for (int64_t c0 = 0; c0 < kRows; c0 += 64) {
        double acc = 0;
        for (int64_t r = c0; r < std::min<int64_t>(kRows, c0 + 64); ++r)
          if (dys[v][size_t(r)] != 0.0f) acc += double(dys[v][size_t(r)]) * double(w[size_t(r * kCols + c)]);
        s += acc;
      }
      want[size_t(c)] += float(s);
    }
    EXPECT_TRUE(same_bits(alone[v], want)) << "vector " << v;
  }
  for (int threads : {1, 3}) {
    ThreadPool pool(threads);
    std::vector<std::vector<float>> dxs(dys.size(), random_vector(kCols, 300));
    std::vector<const float*> in;
    std::vector<float*> out;
    for (size_t v = 0; v < dys.size(); ++v) {
      in.push_back(dys[v].data());
      out.push_back(dxs[v].data());
    }
    matvec_transposed_add_f32_many(m.view(), in, out, pool);
    for (size_t v = 0; v < dys.size(); ++v)
      EXPECT_TRUE(same_bits(dxs[v], alone[v])) << "vector " << v << ", " << threads << " threads";
  }
}

}  // namespace
}  // namespace agentkv
