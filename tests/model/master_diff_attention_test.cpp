// Restore inside attention on the real models (issue 17): attention over an agent's context in
// master–diff form (share/master_diff_attention.h: the shared segment read from the master's blocks
// with the query rotated back, the diff rows as overrides, nothing dense written) equals attend_group
// over the dense copy SegmentDiff::materialize() writes, within attention_spans_bound
// (ops/attention_spans.h), for every layer (Gemma 3's local and global RoPE bases included) and KV
// head, every agent of a blended round, every diff format, over the whole context and over a window
// that starts inside the segment. Prints the largest error seen.
#include "share/master_diff_attention.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "blended_round.h"

namespace agentkv {
namespace {

using testing::blend_round;
using testing::BlendedRound;
using testing::real_model;

float l2(const float* x, int n) {
  double s = 0;
  for (int i = 0; i < n; ++i) s += double(x[i]) * x[i];
  return float(std::sqrt(s));
}

class MasterDiffAttentionTest : public ::testing::TestWithParam<std::string> {};

TEST_P(MasterDiffAttentionTest, AttentionOverMasterPlusDiffEqualsAttentionOverTheDenseCopy) {
  const LoadedModel& lm = real_model(GetParam());
  const ModelConfig& cfg = lm.config();
  ThreadPool pool(0);
  BlendedRound b;
  ASSERT_NO_FATAL_FAILURE(blend_round(lm, pool, b));
  KvManager& m = *b.km;
  const KvArena& arena = m.arena();
  const int bs = m.block_size(), hd = cfg.head_dim, kvd = cfg.kv_dim(), group = cfg.n_head / cfg.n_head_kv;
  const int32_t n_seg = int32_t(b.r.segment.size());
  const float scale = 1.0f / std::sqrt(float(hd));
  float worst_err = 0, worst_share = 0;  // the largest error, and the largest error as a share of its bound
  for (DiffFormat format : {DiffFormat::kF16, DiffFormat::kInt8, DiffFormat::kInt4}) {
    for (size_t a = 0; a < b.agents.size(); ++a) {
      const int32_t p = b.segs[a].slot0;
      const KvSlotRange agent_seg{b.segs[a].blocks, p};
      auto rows = SegmentDiff::differing_rows(*lm.model, *b.master, agent_seg, p, pool);
      ASSERT_TRUE(rows);
      auto diff = SegmentDiff::extract(b.master, agent_seg, p, *rows, DiffPacking{format, lm.model.get(), &pool});
      ASSERT_TRUE(diff);
      // The dense reference: the agent's prefix, then the segment as materialize() writes it.
      KvSequence ref(m);
      ASSERT_TRUE(ref.reserve(p + n_seg));
      const KvSlotRange ref_all{SeqBlocks{ref.blocks().data(), int32_t(ref.blocks().size())}, 0};
      auto prefix = PackedKv::pack(m, KvSlotRange{b.segs[a].blocks, 0}, p);
      ASSERT_TRUE(prefix);
      prefix->restore(ref_all);
      ASSERT_TRUE(diff->materialize(*lm.model, KvSlotRange{ref_all.blocks, p}, pool).ok());

      // The fused view reads the prefix from the agent's own blocks and the segment from the master.
      MasterDiffAttention view(*lm.model, arena, b.segs[a].blocks, {{p, &*diff}});
      const int64_t hi = p + n_seg - 1;
      std::vector<float> q(size_t(group) * hd), want(q.size()), got(q.size()), row(size_t(kvd));
      std::vector<float> scratch(size_t(group) * size_t(hi + 1));
      std::vector<AttentionSpan> spans;
      for (int il = 0; il < cfg.n_layer; ++il) {
        view.prepare_layer(il);
        const PagedKvLayer L = arena.layer(il);
        for (int64_t lo : {int64_t(0), int64_t(p + n_seg / 2)}) {
          spans.clear();
          view.spans(lo, hi, spans);
          for (int kvh = 0; kvh < cfg.n_head_kv; ++kvh) {
            // Queries with the model's own magnitudes: the context's K rows of this head (f32).
            for (int h = 0; h < group; ++h) {
              const int64_t s = hi - 3 * h;
              kv_load(row.data(), L.k(ref.blocks()[size_t(s / bs)], int(s % bs)), kvd);
              std::copy(row.begin() + kvh * hd, row.begin() + (kvh + 1) * hd, q.begin() + h * hd);
            }
            attend_group(q.data(), group, L, ref.blocks().data(), lo, hi, kvh, hd, scale, want.data(), scratch.data(),
                         cfg.attn_softcap);
            attend_spans(q.data(), group, L, spans, kvh, hd, scale, got.data(), scratch.data(), cfg.attn_softcap);
            float qn = 0, kn = 0, vmax = 0;
            for (int h = 0; h < group; ++h) qn = std::max(qn, l2(q.data() + h * hd, hd));
            const std::vector<int32_t>& mt = b.master->blocks();
            for (int32_t i = 0; i < n_seg; ++i) {
              const int32_t ms = b.mstart + i;
              kv_load(row.data(), L.k(mt[size_t(ms / bs)], ms % bs), kvd);
              kn = std::max(kn, l2(row.data() + kvh * hd, hd));
            }
            for (int64_t s = lo; s <= hi; ++s) {
              kv_load(row.data(), L.v(ref.blocks()[size_t(s / bs)], int(s % bs)), kvd);
              for (int d = 0; d < hd; ++d) vmax = std::max(vmax, std::fabs(row[size_t(kvh * hd + d)]));
            }
            const float bound = attention_spans_bound(attention_score_bound(scale, hd, qn, kn), vmax, hi - lo + 1);
            for (size_t e = 0; e < got.size(); ++e) {
              const float err = std::fabs(got[e] - want[e]);
              ASSERT_LE(err, bound) << diff_format_name(format) << " agent " << a << " layer " << il << " kv head "
                                    << kvh << " lo " << lo << " element " << e;
              worst_err = std::max(worst_err, err);
              worst_share = std::max(worst_share, err / bound);
            }
          }
        }
      }
    }
  }
  std::printf("%s: fused vs dense attention, max |error| %.3g, at most %.3g of the stated bound\n",
              GetParam().c_str(), worst_err, worst_share);
}

INSTANTIATE_TEST_SUITE_P(BothModels, MasterDiffAttentionTest, ::testing::Values("smollm2", "gemma3"));

}  // namespace
}  // namespace agentkv
