// Restore inside attention on the real models (issue 17): attention over an agent's context in
// master–diff form (share/master_diff_attention.h: the shared segment read from the master's blocks
// with the query rotated back, the diff rows as overrides, nothing dense written) equals attend_group
// over the dense copy SegmentDiff::materialize() writes, within attention_spans_bound
// (ops/attention_spans.h), for every layer (Gemma 3's local and global RoPE bases included) and KV
// head, every agent of a blended round, every diff format: for a SegmentDiff over the whole context
// and over a window that starts inside the segment (the layer prepared from there, as a sliding-window
// layer is: the diff rows before it not decoded), and for the compact context (CompactContext, dropped
// blocks as holes) against its expand(). Prints the largest error seen.
#include "share/master_diff_attention.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "blended_round.h"
#include "engine/compact_context.h"

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

struct Worst {
  float err = 0;    // the largest |fused - dense|
  float share = 0;  // the largest error as a share of its bound
  float of_v = 0;   // the largest error as a share of the largest |V| attended
};

// For every layer and KV head and each lo of `los`: attend_spans over `view` against attend_group over
// the dense table `ref`, slots [lo, hi], queries made of the context's own K rows (the model's
// magnitudes). The bound takes the largest K norm of the dense context, widened by its f16 rounding,
// for the master rows' (their re-rotated copies are in it).
void compare_every_layer(const LoadedModel& lm, const KvArena& arena, MasterDiffAttention& view,
                         const std::vector<int32_t>& ref, int64_t hi, const std::vector<int64_t>& los, Worst& worst,
                         const std::string& what) {
  const ModelConfig& cfg = lm.config();
  const int bs = arena.block_size(), hd = cfg.head_dim, kvd = cfg.kv_dim(), group = cfg.n_head / cfg.n_head_kv;
  const float scale = 1.0f / std::sqrt(float(hd));
  std::vector<float> q(size_t(group) * hd), want(q.size()), got(q.size()), row(static_cast<size_t>(kvd));
  std::vector<float> scratch(size_t(group) * size_t(hi + 1));
  std::vector<AttentionSpan> spans;
  for (int il = 0; il < cfg.n_layer; ++il) {
    const PagedKvLayer L = arena.layer(il);
    for (int64_t lo : los) {
      view.prepare_layer(il, lo);  // from lo: the rows before it are not decoded (a sliding window's)
      spans.clear();
      view.spans(lo, hi, spans);
      for (int kvh = 0; kvh < cfg.n_head_kv; ++kvh) {
        float kn = 0, vmax = 0;
        for (int64_t s = lo; s <= hi; ++s) {
          kv_load(row.data(), L.k(ref[size_t(s / bs)], int(s % bs)), kvd);
          kn = std::max(kn, l2(row.data() + kvh * hd, hd));
          kv_load(row.data(), L.v(ref[size_t(s / bs)], int(s % bs)), kvd);
          for (int d = 0; d < hd; ++d) vmax = std::max(vmax, std::fabs(row[size_t(kvh * hd + d)]));
        }
        kn *= 1.0f + 0x1p-10f;
        for (int h = 0; h < group; ++h) {
          const int64_t s = hi - 3 * h;
          kv_load(row.data(), L.k(ref[size_t(s / bs)], int(s % bs)), kvd);
          std::copy(row.begin() + kvh * hd, row.begin() + (kvh + 1) * hd, q.begin() + h * hd);
        }
        float qn = 0;
        for (int h = 0; h < group; ++h) qn = std::max(qn, l2(q.data() + h * hd, hd));
        attend_group(q.data(), group, L, ref.data(), lo, hi, kvh, hd, scale, want.data(), scratch.data(),
                     cfg.attn_softcap);
        attend_spans(q.data(), group, L, spans, kvh, hd, scale, got.data(), scratch.data(), cfg.attn_softcap);
        const float bound = attention_spans_bound(attention_score_bound(scale, hd, qn, kn), vmax, hi - lo + 1);
        for (size_t e = 0; e < got.size(); ++e) {
          const float err = std::fabs(got[e] - want[e]);
          ASSERT_LE(err, bound) << what << " layer " << il << " kv head " << kvh << " lo " << lo << " element " << e;
          worst.err = std::max(worst.err, err);
          worst.share = std::max(worst.share, err / bound);
          worst.of_v = std::max(worst.of_v, err / vmax);
        }
      }
    }
  }
}

class MasterDiffAttentionTest : public ::testing::TestWithParam<std::string> {};

TEST_P(MasterDiffAttentionTest, AttentionOverMasterPlusDiffEqualsAttentionOverTheDenseCopy) {
  const LoadedModel& lm = real_model(GetParam());
  ThreadPool pool(0);
  BlendedRound b;
  ASSERT_NO_FATAL_FAILURE(blend_round(lm, pool, b));
  KvManager& m = *b.km;
  const int32_t n_seg = int32_t(b.r.segment.size());
  Worst worst;
  for (DiffFormat format : {DiffFormat::kF16, DiffFormat::kInt8, DiffFormat::kInt4}) {
    for (size_t a = 0; a < b.agents.size(); ++a) {
      const std::string what = std::string(diff_format_name(format)) + " agent " + std::to_string(a);
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
      MasterDiffAttention view(*lm.model, m.arena(), b.segs[a].blocks, {{p, &*diff}});
      ASSERT_NO_FATAL_FAILURE(compare_every_layer(lm, m.arena(), view, ref.blocks(), p + n_seg - 1,
                                                  {0, p + n_seg / 2}, worst, what));

      // The same context compacted as the engine keeps it (dropped blocks as holes) against expand().
      KvSequence& dense = b.agents[a];
      if (dense.n_tokens() == 0) {  // the blend wrote its K/V; its tokens are committed once
        std::vector<int32_t> toks = b.r.prefix[a];
        toks.insert(toks.end(), b.r.segment.begin(), b.r.segment.end());
        dense.commit(toks);
      }
      auto cc = CompactContext::compact(dense, {BlendedRun{p, n_seg, b.master_seq, b.mstart}}, *lm.model, pool, format);
      ASSERT_TRUE(cc);
      ASSERT_GT(cc->n_dropped(), 0);
      auto expanded = cc->expand(*lm.model, pool);
      ASSERT_TRUE(expanded);
      MasterDiffAttention cview = MasterDiffAttention::of(*lm.model, *cc->kept(), cc->diffs());
      ASSERT_NO_FATAL_FAILURE(compare_every_layer(lm, m.arena(), cview, expanded->blocks(), p + n_seg - 1, {0}, worst,
                                                  what + " compact"));
    }
  }
  std::printf("%s: fused vs dense attention, max |error| %.3g (at most %.3g of max |V|), at most %.3g of the "
              "stated bound\n", GetParam().c_str(), worst.err, worst.of_v, worst.share);
}

INSTANTIATE_TEST_SUITE_P(BothModels, MasterDiffAttentionTest, ::testing::Values("smollm2", "gemma3"));

}  // namespace
}  // namespace agentkv
