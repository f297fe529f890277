// attend_spans_many (ops/attention_spans.h) on synthetic K/V, no model: several query tokens of one
// sequence over one span list (plain rows, a master span at another RoPE delta with override rows, plain
// rows again), each over its own row range (causal ends, sliding windows, ranges across the 64-row
// tiles), give every token exactly attend_spans' output over the spans of its own rows, bit for bit, at
// every ISA level, for group sizes under and over the AVX2 kernel's 8 and head sizes it handles and not.
// clip_spans gives the spans a context would describe for those rows.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "ops/attention_spans.h"
#include "ops/cpu_features.h"

namespace agentkv {
namespace attention_many_test {
namespace {

constexpr int kBlock = 16;
constexpr int kHeadsKv = 2;
constexpr int kPrefix = 37, kSeg = 150, kSuffix = 120, kCtx = kPrefix + kSeg + kSuffix;
constexpr int kMasterSlot0 = 5;

struct Layout {
  int head_dim;
  int kv_dim() const { return kHeadsKv * head_dim; }
  std::vector<kv_t> data;
  PagedKvLayer layer;
  std::vector<int32_t> ctable, mtable;
  std::vector<int32_t> override_slots;  // master slots, ascending
  std::vector<kv_t> overrides;          // per override: K then V, kv_dim each
  Rope rope;

  Layout(int hd, std::mt19937& rng)
      : head_dim(hd), data(size_t(60) * 2 * kBlock * size_t(kHeadsKv * hd)), rope(hd, hd, 10000.0f, RopeStyle::kNeox) {
    layer.base = data.data();
    layer.block_stride = 2 * int64_t(kBlock) * kv_dim();
    layer.v_offset = int64_t(kBlock) * kv_dim();
    layer.block_size = kBlock;
    layer.kv_dim = kv_dim();
    std::vector<int32_t> blocks(60);
    for (int i = 0; i < 60; ++i) blocks[size_t(i)] = i;
    std::shuffle(blocks.begin(), blocks.end(), rng);
    ctable.assign(blocks.begin(), blocks.begin() + (kCtx + kBlock - 1) / kBlock);
    mtable.assign(blocks.begin() + 30, blocks.begin() + 30 + (kMasterSlot0 + kSeg + kBlock - 1) / kBlock);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    std::vector<float> row(static_cast<size_t>(kv_dim()));
    const auto fill = [&](kv_t* dst, float sigma) {
      for (float& x : row) x = sigma * nd(rng);
      kv_store(dst, row.data(), kv_dim());
    };
    for (int s = 0; s < kCtx; ++s) {
      fill(layer.k(ctable[s / kBlock], s % kBlock), 3.0f);
      fill(layer.v(ctable[s / kBlock], s % kBlock), 1.0f);
    }
    for (int s = kMasterSlot0; s < kMasterSlot0 + kSeg; ++s) {
      fill(layer.k(mtable[s / kBlock], s % kBlock), 3.0f);
      fill(layer.v(mtable[s / kBlock], s % kBlock), 1.0f);
    }
    for (int i : {0, 1, 2, 63, 64, 65, 100, 149}) override_slots.push_back(kMasterSlot0 + i);
    overrides.resize(override_slots.size() * 2 * size_t(kv_dim()));
    for (size_t o = 0; o < override_slots.size(); ++o) {
      fill(overrides.data() + o * 2 * size_t(kv_dim()), 3.0f);
      fill(overrides.data() + (o * 2 + 1) * size_t(kv_dim()), 1.0f);
    }
  }

  // The spans a master-diff context describes for slots [lo, hi]: written out here, independently of
  // clip_spans.
  std::vector<AttentionSpan> spans(int64_t lo, int64_t hi) const {
    std::vector<AttentionSpan> out;
    int64_t c = lo;
    if (c < kPrefix && c <= hi) {
      const int64_t e = std::min<int64_t>(kPrefix - 1, hi);
      out.push_back(AttentionSpan{ctable.data(), c, e - c + 1});
      c = e + 1;
    }
    if (c < kPrefix + kSeg && c <= hi) {
      const int64_t e = std::min<int64_t>(kPrefix + kSeg - 1, hi);
      AttentionSpan m{mtable.data(), kMasterSlot0 + (c - kPrefix), e - c + 1, &rope, -1463};
      const auto first = std::lower_bound(override_slots.begin(), override_slots.end(), m.lo);
      const auto last = std::lower_bound(first, override_slots.end(), m.lo + m.n);
      const int64_t skip = first - override_slots.begin();
      m.n_overrides = last - first;
      m.override_slots = override_slots.data() + skip;
      m.override_k = overrides.data() + skip * 2 * kv_dim();
      m.override_v = m.override_k + kv_dim();
      m.override_stride = 2 * kv_dim();
      out.push_back(m);
      c = e + 1;
    }
    if (c <= hi) out.push_back(AttentionSpan{ctable.data(), c, hi - c + 1});
    return out;
  }
};

bool same_span(const AttentionSpan& a, const AttentionSpan& b) {
  if (a.table != b.table || a.lo != b.lo || a.n != b.n || a.rope != b.rope || a.rope_delta != b.rope_delta ||
      a.n_overrides != b.n_overrides)
    return false;
  return a.n_overrides == 0 || (a.override_slots == b.override_slots && a.override_k == b.override_k &&
                                a.override_v == b.override_v && a.override_stride == b.override_stride);
}

// Token ranges as [first slot, last slot], all within [lo, hi] of the call.
void check(int head_dim, int group, float softcap, int64_t lo, int64_t hi,
           const std::vector<std::pair<int64_t, int64_t>>& ranges, std::mt19937& rng) {
  const Layout L(head_dim, rng);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  const float scale = 1.0f / std::sqrt(float(head_dim));
  const std::vector<AttentionSpan> spans = L.spans(lo, hi);
  for (int kvh = 0; kvh < kHeadsKv; ++kvh) {
    std::vector<float> q(ranges.size() * size_t(group) * size_t(head_dim));
    for (float& x : q) x = 2.0f * nd(rng);
    const size_t qn = size_t(group) * size_t(head_dim);
    std::vector<float> got(q.size(), -7.0f), want(q.size());
    std::vector<SpanQuery> queries;
    for (size_t t = 0; t < ranges.size(); ++t)
      queries.push_back(SpanQuery{&q[t * qn], &got[t * qn], ranges[t].first - lo, ranges[t].second - ranges[t].first + 1});
    attend_spans_many(queries, group, L.layer, spans, kvh, head_dim, scale, softcap);
    std::vector<AttentionSpan> clipped;
    for (size_t t = 0; t < ranges.size(); ++t) {
      const auto [a, b] = ranges[t];
      const std::vector<AttentionSpan> own = L.spans(a, b);
      clip_spans(spans, a - lo, b - a + 1, clipped);
      ASSERT_EQ(clipped.size(), own.size()) << "token " << t;
      for (size_t s = 0; s < own.size(); ++s) EXPECT_TRUE(same_span(clipped[s], own[s])) << "token " << t << " span " << s;
      std::vector<float> scratch(size_t(group) * size_t(b - a + 1));
      attend_spans(&q[t * qn], group, L.layer, own, kvh, head_dim, scale, &want[t * qn], scratch.data(), softcap);
      for (size_t e = 0; e < qn; ++e)
        ASSERT_EQ(std::memcmp(&got[t * qn + e], &want[t * qn + e], sizeof(float)), 0)
            << "token " << t << " rows [" << a << ", " << b << "] kv head " << kvh << " element " << e << ": "
            << got[t * qn + e] << " vs " << want[t * qn + e];
    }
  }
}

TEST(AttentionSpansMany, EveryTokenEqualsAttendSpansOverItsOwnRowsBitForBit) {
  std::mt19937 rng(29);
  // A causal prefill's run (the same start, ends inside the prefix, the master span and past it, across
  // tiles), a sliding window's run (each its own start), scattered selected tokens, one token alone.
  const std::vector<std::pair<int64_t, int64_t>> causal = {{0, 0}, {0, 36}, {0, 37}, {0, 63}, {0, 64}, {0, 101},
                                                           {0, 186}, {0, 187}, {0, 250}, {0, kCtx - 1}};
  std::vector<std::pair<int64_t, int64_t>> window;
  for (int64_t e : {int64_t(40), int64_t(41), int64_t(90), int64_t(150), int64_t(200), int64_t(kCtx - 1)})
    window.emplace_back(std::max<int64_t>(0, e - 47), e);
  const std::vector<std::pair<int64_t, int64_t>> from_inside = {{60, 70}, {60, 250}, {60, 60}, {60, kCtx - 1}};
  const IsaLevel prev = active_isa_level();
  for (IsaLevel level : {IsaLevel::kScalar, IsaLevel::kAvx2, IsaLevel::kAvx512}) {
    if (level > detected_isa_level()) continue;
    set_isa_level_for_testing(level);
    for (int hd : {64, 256, 20})  // AVX2's head sizes, and one only the scalar kernel takes
      for (int group : {1, 3, 4, 9})  // 9: wider than the AVX2 kernel's 8
        for (float softcap : {0.0f, 5.0f}) {
          SCOPED_TRACE(testing::Message() << "isa " << int(level) << " hd " << hd << " group " << group
                                          << " softcap " << softcap);
          ASSERT_NO_FATAL_FAILURE(check(hd, group, softcap, 0, kCtx - 1, causal, rng));
          ASSERT_NO_FATAL_FAILURE(check(hd, group, softcap, window.front().first, kCtx - 1, window, rng));
          ASSERT_NO_FATAL_FAILURE(check(hd, group, softcap, 60, kCtx - 1, from_inside, rng));
          ASSERT_NO_FATAL_FAILURE(check(hd, group, softcap, 0, 130, {{0, 130}}, rng));
        }
  }
  set_isa_level_for_testing(prev);
}

// Tokens whose scores together pass what one call holds at once (16 MiB per thread) are taken in groups:
// 16 tokens of 8 heads over ~40k plain rows, the same bits as each token alone.
TEST(AttentionSpansMany, TokensOfALongContextTakenInGroupsKeepTheirBits) {
  constexpr int hd = 8, group = 8, kv_dim = hd, block = 16, n_ctx = 40000;
  std::mt19937 rng(31);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<kv_t> data(size_t(n_ctx / block) * 2 * block * kv_dim);
  std::vector<float> row(kv_dim);
  for (size_t i = 0; i < data.size(); i += kv_dim) {
    for (float& x : row) x = 2.0f * nd(rng);
    kv_store(&data[i], row.data(), kv_dim);
  }
  PagedKvLayer l;
  l.base = data.data();
  l.block_stride = 2 * block * kv_dim;
  l.v_offset = block * kv_dim;
  l.block_size = block;
  l.kv_dim = kv_dim;
  std::vector<int32_t> table(n_ctx / block);
  for (size_t i = 0; i < table.size(); ++i) table[i] = int32_t(i);
  const AttentionSpan all{table.data(), 0, n_ctx};
  constexpr int kTokens = 16;
  std::vector<float> q(size_t(kTokens) * group * hd), got(q.size()), want(q.size());
  for (float& x : q) x = nd(rng);
  std::vector<SpanQuery> queries;
  for (int t = 0; t < kTokens; ++t)
    queries.push_back(SpanQuery{&q[size_t(t) * group * hd], &got[size_t(t) * group * hd], 0, n_ctx - kTokens + t + 1});
  attend_spans_many(queries, group, l, std::span<const AttentionSpan>(&all, 1), 0, hd, 0.3f);
  std::vector<float> scratch(size_t(group) * n_ctx);
  for (int t = 0; t < kTokens; ++t) {
    const AttentionSpan own{table.data(), 0, queries[size_t(t)].n_rows};
    attend_spans(&q[size_t(t) * group * hd], group, l, std::span<const AttentionSpan>(&own, 1), 0, hd, 0.3f,
                 &want[size_t(t) * group * hd], scratch.data());
  }
  EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)), 0);
}

}  // namespace
}  // namespace attention_many_test
}  // namespace agentkv
