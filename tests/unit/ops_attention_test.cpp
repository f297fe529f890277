// Paged attention: every ISA level against a float64 reference computed from the same f16 cache,
// across block boundaries, GQA group sizes and windows.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "ops/attention.h"
#include "ops/cpu_features.h"
#include "ops/fp16.h"

namespace agentkv {
namespace {

struct AttentionCase {
  int head_dim, n_kv_heads, group, block_size, n_slots;
  int64_t lo;
};

void run_case(const AttentionCase& c, IsaLevel level) {
  const IsaLevel prev = set_isa_level_for_testing(level);
  std::mt19937 rng(c.head_dim * 131 + c.n_slots);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  const int kv_dim = c.n_kv_heads * c.head_dim;
  const int n_blocks = (c.n_slots + c.block_size - 1) / c.block_size;
  std::vector<kv_t> arena(size_t(n_blocks) * 2 * c.block_size * kv_dim);
  PagedKvLayer l;
  l.base = arena.data();
  l.block_stride = 2 * int64_t(c.block_size) * kv_dim;
  l.v_offset = int64_t(c.block_size) * kv_dim;
  l.block_size = c.block_size;
  l.kv_dim = kv_dim;
  // Blocks in reverse order so the table matters.
  std::vector<int32_t> table(n_blocks);
  for (int i = 0; i < n_blocks; ++i) table[i] = n_blocks - 1 - i;
  std::vector<float> row(kv_dim);
  for (int s = 0; s < c.n_slots; ++s) {
    for (auto& x : row) x = nd(rng);
    kv_store(l.k(table[s / c.block_size], s % c.block_size), row.data(), kv_dim);
    for (auto& x : row) x = nd(rng);
    kv_store(l.v(table[s / c.block_size], s % c.block_size), row.data(), kv_dim);
  }
  const int kvh = c.n_kv_heads - 1;
  std::vector<float> q(size_t(c.group) * c.head_dim), out(q.size());
  for (auto& x : q) x = nd(rng);
  const int64_t hi = c.n_slots - 1;
  std::vector<float> scratch(size_t(c.group) * size_t(hi - c.lo + 1));
  const float scale = 1.0f / std::sqrt(float(c.head_dim));
  attend_group(q.data(), c.group, l, table.data(), c.lo, hi, kvh, c.head_dim, scale, out.data(), scratch.data());
  for (int h = 0; h < c.group; ++h) {
    std::vector<double> s;
    double mx = -1e300;
    for (int64_t j = c.lo; j <= hi; ++j) {
      const kv_t* k = l.k(table[j / c.block_size], int(j % c.block_size)) + kvh * c.head_dim;
      double d = 0;
      for (int i = 0; i < c.head_dim; ++i) d += double(round_through_fp16(q[h * c.head_dim + i])) * fp16_to_f32(k[i]);
      s.push_back(d * scale);
      mx = std::max(mx, s.back());
    }
    double sum = 0;
    for (double& x : s) sum += (x = std::exp(x - mx));
    for (int i = 0; i < c.head_dim; ++i) {
      double o = 0;
      for (int64_t j = c.lo; j <= hi; ++j) {
        const kv_t* v = l.v(table[j / c.block_size], int(j % c.block_size)) + kvh * c.head_dim;
        o += s[j - c.lo] / sum * fp16_to_f32(v[i]);
      }
      // f16-rounded weights: relative 2^-11 per weight, so the output is within ~1e-3 of exact.
      EXPECT_NEAR(out[h * c.head_dim + i], o, 2e-3 * (1 + std::fabs(o))) << "head " << h << " dim " << i;
    }
  }
  set_isa_level_for_testing(prev);
}

TEST(PagedAttention, MatchesReferenceAtEveryIsaLevel) {
  const AttentionCase cases[] = {{64, 3, 3, 16, 1, 0},   {64, 3, 3, 16, 37, 0},  {256, 1, 4, 16, 70, 20},
                        {64, 2, 1, 4, 9, 8},    {8, 1, 2, 3, 10, 2},    {12, 1, 2, 5, 11, 0},
                        {64, 3, 9, 16, 33, 5}};
  for (IsaLevel level : {IsaLevel::kScalar, IsaLevel::kAvx2, IsaLevel::kAvx512, IsaLevel::kAvx512Vnni}) {
    if (level > detected_isa_level()) continue;
    for (const AttentionCase& c : cases) run_case(c, level);
  }
}

}  // namespace
}  // namespace agentkv
