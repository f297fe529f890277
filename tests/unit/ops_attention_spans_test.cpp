// attend_spans (ops/attention_spans.h) on synthetic K/V, no model: a shared segment read in place as a
// master span (stored at other RoPE positions, the query rotated back) with diff rows as overrides
// (f16 rows, int8 / int4 differences from the re-rotated master, kv/kv_diff_codec.h), between plain
// spans, against attend_group over the dense copy materialize() would write (the master re-rotated
// and rounded to f16, then the restored diff rows): within attention_spans_bound on every output
// element, for both RoPE styles, several deltas, softcap on and off, both ISAs' head sizes. Plain
// spans, and a master span with delta 0, equal attend_group bit for bit.
#include "ops/attention_spans.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "kv/kv_diff_codec.h"

namespace agentkv {
namespace {

constexpr int kBlock = 16;
constexpr int kHeadsKv = 2;
constexpr int kGroup = 3;  // query heads per KV head

// A single-layer paged store of n_blocks blocks.
struct Store {
  int head_dim;
  int kv_dim() const { return kHeadsKv * head_dim; }
  std::vector<kv_t> data;
  PagedKvLayer layer;
  Store(int hd, int n_blocks) : head_dim(hd), data(size_t(n_blocks) * 2 * kBlock * size_t(kHeadsKv * hd)) {
    layer.base = data.data();
    layer.block_stride = 2 * int64_t(kBlock) * kv_dim();
    layer.v_offset = int64_t(kBlock) * kv_dim();
    layer.block_size = kBlock;
    layer.kv_dim = kv_dim();
  }
};

float norm(const float* x, int n) {
  double s = 0;
  for (int i = 0; i < n; ++i) s += double(x[i]) * x[i];
  return float(std::sqrt(s));
}

struct Case {
  int head_dim;
  int n_rot;
  RopeStyle style;
  int64_t delta;
  DiffFormat format;
  float softcap;
};

// Context: [prefix: 37 plain rows][segment: 100 rows from the master][suffix: 20 plain rows].
struct Worst {
  float err = 0;    // the largest |fused - dense|
  float share = 0;  // the largest error as a share of its bound
};

void check(const Case& c, std::mt19937& rng, Worst& seen) {
  const int hd = c.head_dim, kvd = kHeadsKv * hd;
  constexpr int kPrefix = 37, kSeg = 100, kSuffix = 20, kCtx = kPrefix + kSeg + kSuffix;
  constexpr int64_t kMasterPos0 = 3000;
  constexpr int kMasterSlot0 = 5;  // the segment starts inside the master's first block
  const Rope rope(hd, c.n_rot, 10000.0f, c.style);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  const auto random_row = [&](float sigma) {
    std::vector<float> r(static_cast<size_t>(kvd));
    for (float& x : r) x = sigma * nd(rng);
    return r;
  };

  // The master's and the context's blocks share one arena, as in the KV manager's; the dense copy has one of its own.
  Store ctx(hd, 20), dense(hd, 20);
  std::vector<int32_t> mtable = {16, 12, 17, 10, 11, 13, 14, 15}, ctable = {9, 3, 5, 0, 18, 1, 2, 4, 6, 7, 8, 19};
  const PagedKvLayer& M = ctx.layer;
  // Master K: projections rotated to their stored positions, like the forward pass caches them.
  for (int i = 0; i < kSeg; ++i) {
    const int s = kMasterSlot0 + i;
    std::vector<float> k = random_row(3.0f), v = random_row(1.0f);
    rope.apply(k.data(), kHeadsKv, kMasterPos0 + i);
    kv_store(M.k(mtable[s / kBlock], s % kBlock), k.data(), kvd);
    kv_store(M.v(mtable[s / kBlock], s % kBlock), v.data(), kvd);
  }
  // Plain rows: the same in the context and the dense copy.
  const auto put = [&](Store& st, int slot, const kv_t* k, const kv_t* v) {
    std::copy(k, k + kvd, st.layer.k(ctable[slot / kBlock], slot % kBlock));
    std::copy(v, v + kvd, st.layer.v(ctable[slot / kBlock], slot % kBlock));
  };
  for (int slot = 0; slot < kCtx; ++slot) {
    if (slot >= kPrefix && slot < kPrefix + kSeg) continue;
    std::vector<kv_t> k(static_cast<size_t>(kvd)), v(static_cast<size_t>(kvd));
    kv_store(k.data(), random_row(3.0f).data(), kvd);
    kv_store(v.data(), random_row(1.0f).data(), kvd);
    put(ctx, slot, k.data(), v.data());
    put(dense, slot, k.data(), v.data());
  }
  // The dense segment as materialize() writes it: the master re-rotated (rounded to f16), V as is,
  // then the diff rows restored over it. The overrides hold the restored rows.
  const KvRowCodec codec(c.format, 1, kvd, hd);
  const std::vector<int32_t> rows = {0, 5, 6, 50, 98, 99};
  std::vector<int32_t> override_slots;
  std::vector<kv_t> overrides(rows.size() * 2 * size_t(kvd));
  std::vector<uint8_t> rec(codec.vector_bytes());
  size_t j = 0;
  for (int i = 0; i < kSeg; ++i) {
    const int ms = kMasterSlot0 + i;
    std::vector<float> k(static_cast<size_t>(kvd));
    kv_load(k.data(), M.k(mtable[ms / kBlock], ms % kBlock), kvd);
    rope.shift(k.data(), kHeadsKv, c.delta);
    std::vector<kv_t> kb(static_cast<size_t>(kvd)), vb(M.v(mtable[ms / kBlock], ms % kBlock), M.v(mtable[ms / kBlock], ms % kBlock) + kvd);
    kv_store(kb.data(), k.data(), kvd);
    if (j < rows.size() && rows[j] == i) {
      // A recomputed row: the re-rotated master moved a little (f16 rows: anything).
      for (int e = 0; e < kvd; ++e) k[size_t(e)] += 0.3f * nd(rng);
      std::vector<float> vf(static_cast<size_t>(kvd));
      kv_load(vf.data(), vb.data(), kvd);
      for (float& x : vf) x += 0.3f * nd(rng);
      std::vector<kv_t> kd(static_cast<size_t>(kvd)), vd(static_cast<size_t>(kvd));
      kv_store(kd.data(), k.data(), kvd);
      kv_store(vd.data(), vf.data(), kvd);
      codec.encode(kd.data(), kb.data(), rec.data());
      codec.decode(rec.data(), kb.data());
      codec.encode(vd.data(), vb.data(), rec.data());
      codec.decode(rec.data(), vb.data());
      std::copy(kb.begin(), kb.end(), overrides.begin() + int64_t(j) * 2 * kvd);
      std::copy(vb.begin(), vb.end(), overrides.begin() + int64_t(j) * 2 * kvd + kvd);
      override_slots.push_back(ms);
      ++j;
    }
    put(dense, kPrefix + i, kb.data(), vb.data());
  }

  const float scale = 1.0f / std::sqrt(float(hd));
  std::vector<float> q(size_t(kGroup) * hd);
  std::vector<float> want(q.size()), got(q.size()), scratch(size_t(kGroup) * kCtx);
  for (int64_t lo : {int64_t(0), int64_t(kPrefix + 40)}) {  // the whole context, and a window from inside the segment
    for (int kvh = 0; kvh < kHeadsKv; ++kvh) {
      for (float& x : q) x = 2.0f * nd(rng);
      attend_group(q.data(), kGroup, dense.layer, ctable.data(), lo, kCtx - 1, kvh, hd, scale, want.data(),
                   scratch.data(), c.softcap);
      std::vector<AttentionSpan> spans;
      const int64_t seg_lo = std::max<int64_t>(lo, kPrefix);
      if (lo < kPrefix) spans.push_back(AttentionSpan{ctable.data(), lo, kPrefix - lo});
      AttentionSpan m{mtable.data(), kMasterSlot0 + (seg_lo - kPrefix), kPrefix + kSeg - seg_lo, &rope, c.delta};
      const int64_t skip = std::lower_bound(override_slots.begin(), override_slots.end(), m.lo) - override_slots.begin();
      m.override_slots = override_slots.data() + skip;
      m.n_overrides = int64_t(override_slots.size()) - skip;
      m.override_k = overrides.data() + skip * 2 * kvd;
      m.override_v = m.override_k + kvd;
      m.override_stride = 2 * kvd;
      spans.push_back(m);
      spans.push_back(AttentionSpan{ctable.data(), kPrefix + kSeg, kSuffix});
      attend_spans(q.data(), kGroup, ctx.layer, spans, kvh, hd, scale, got.data(), scratch.data(), c.softcap);

      // The bound: the largest score difference over the master rows, the largest |V| attended.
      float qn = 0, kn = 0, vmax = 0;
      for (int h = 0; h < kGroup; ++h) qn = std::max(qn, norm(q.data() + h * hd, hd));
      std::vector<float> r(static_cast<size_t>(kvd));
      for (int i = 0; i < kSeg; ++i) {
        const int ms = kMasterSlot0 + i;
        kv_load(r.data(), M.k(mtable[ms / kBlock], ms % kBlock), kvd);
        kn = std::max(kn, norm(r.data() + kvh * hd, hd));
      }
      for (int64_t s = lo; s < kCtx; ++s) {
        kv_load(r.data(), dense.layer.v(ctable[s / kBlock], int(s % kBlock)), kvd);
        for (int d = 0; d < hd; ++d) vmax = std::max(vmax, std::fabs(r[size_t(kvh * hd + d)]));
      }
      const float eps = attention_score_bound(scale, hd, qn, kn);
      const float bound = attention_spans_bound(eps, vmax, kCtx - lo);
      float worst = 0;
      for (size_t e = 0; e < got.size(); ++e) {
        const float err = std::fabs(got[e] - want[e]);
        worst = std::max(worst, err);
        ASSERT_LE(err, bound) << "element " << e << " lo " << lo << " kv head " << kvh;
      }
      if (c.delta == 0) {
        EXPECT_EQ(got, want) << "delta 0 reads the very values the dense copy holds";
      }
      seen.err = std::max(seen.err, worst);
      seen.share = std::max(seen.share, worst / bound);

      // Plain spans over the dense copy, split anywhere: attend_group bit for bit.
      const std::vector<AttentionSpan> plain = {{ctable.data(), lo, 17}, {ctable.data(), lo + 17, 1},
                                                {ctable.data(), lo + 18, kCtx - lo - 18}};
      attend_spans(q.data(), kGroup, dense.layer, plain, kvh, hd, scale, got.data(), scratch.data(), c.softcap);
      EXPECT_EQ(got, want);
    }
  }
}

TEST(AttentionSpans, MasterPlusDiffEqualsTheMaterializedDenseCopyWithinTheBound) {
  std::mt19937 rng(17);
  Worst seen;
  for (const auto& [hd, n_rot] : {std::pair{64, 64}, std::pair{20, 16}})  // AVX2's head size, and scalar's with partial rotary
    for (RopeStyle style : {RopeStyle::kNorm, RopeStyle::kNeox})
      for (int64_t delta : {int64_t(0), int64_t(30), int64_t(-1463), int64_t(2000), int64_t(-2999)})
        for (DiffFormat f : {DiffFormat::kF16, DiffFormat::kInt8, DiffFormat::kInt4})
          for (float softcap : {0.0f, 5.0f}) {
            SCOPED_TRACE(testing::Message() << "hd " << hd << " delta " << delta << " " << diff_format_name(f)
                                            << " softcap " << softcap);
            ASSERT_NO_FATAL_FAILURE(check(Case{hd, n_rot, style, delta, f, softcap}, rng, seen));
          }
  std::printf("fused vs dense attention: max |error| %.3g, at most %.3g of the stated bound\n", seen.err, seen.share);
}

}  // namespace
}  // namespace agentkv
