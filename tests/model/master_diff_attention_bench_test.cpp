// Restore inside attention vs restoring a dense copy (issue 17): the attention of one decode step
// (every layer, every KV head, one query token) over an agent's context of a 512-token prefix and a
// 1024-token shared segment held as master + diff (15% of its rows, f16 or int8), on both models'
// shapes. Dense: SegmentDiff::materialize() into scratch blocks, then attend_group per layer and head.
// Fused: MasterDiffAttention::prepare_layer (decodes the diff rows) and attend_spans. A printout, not
// a test: disabled by default, run with
//   ./build/agentkv_model_tests --gtest_also_run_disabled_tests --gtest_filter='*MasterDiffAttentionBench*'
// One thread; it reports the thread's CPU time (the machine is shared; wall time measures the neighbours).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <random>

#include "model_test_util.h"
#include "share/master_diff_attention.h"

namespace agentkv {
namespace {

constexpr int32_t kPrefix = 512, kSeg = 1024, kBlockSize = 16;
constexpr double kDiffShare = 0.15;

double cpu_now() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

void fill_random(const KvArena& arena, const std::vector<int32_t>& table, int32_t n, std::mt19937& rng) {
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> row(size_t(arena.kv_dim()));
  for (int32_t s = 0; s < n; ++s)
    for (int il = 0; il < arena.n_layer(); ++il) {
      const PagedKvLayer L = arena.layer(il);
      for (float& x : row) x = nd(rng);
      kv_store(L.k(table[size_t(s / arena.block_size())], s % arena.block_size()), row.data(), int(row.size()));
      for (float& x : row) x = nd(rng);
      kv_store(L.v(table[size_t(s / arena.block_size())], s % arena.block_size()), row.data(), int(row.size()));
    }
}

// Runs fn until at least `min_s` CPU seconds pass; the CPU milliseconds per call.
template <class Fn>
double ms_per_call(Fn&& fn, double min_s = 0.5) {
  fn();
  int n = 0;
  const double t0 = cpu_now();
  double t = t0;
  while (t - t0 < min_s) {
    fn();
    ++n;
    t = cpu_now();
  }
  return 1e3 * (t - t0) / n;
}

void bench(const std::string& name, DiffFormat format) {
  const LoadedModel& lm = testing::real_model(name);
  const ModelConfig& cfg = lm.config();
  ThreadPool pool(1);
  KvManagerOptions ko;
  ko.mem_bytes = int64_t(512) << 20;
  ko.block_size = kBlockSize;
  auto km = KvManager::create(cfg, lm.fingerprint, ko);
  ASSERT_TRUE(km.ok()) << km.error();
  KvManager& m = *km.value();
  const KvArena& arena = m.arena();
  std::mt19937 rng(3);

  // The master [BOS][segment] at positions 0.., the agent's context [prefix][its own copy of the segment].
  KvSequence mseq(m), agent(m), dense(m);
  ASSERT_TRUE(mseq.reserve(1 + kSeg) && agent.reserve(kPrefix + kSeg) && dense.reserve(kPrefix + kSeg));
  fill_random(arena, mseq.blocks(), 1 + kSeg, rng);
  fill_random(arena, agent.blocks(), kPrefix + kSeg, rng);
  std::vector<int32_t> mtoks(size_t(1 + kSeg), 1);
  mseq.commit(mtoks);
  auto master = std::make_shared<const MasterSegment>(std::move(mseq), 1, 1);
  std::vector<int32_t> rows;
  for (int32_t i = 0; i < kSeg; ++i)
    if (std::uniform_real_distribution<double>(0, 1)(rng) < kDiffShare) rows.push_back(i);
  const KvSlotRange agent_seg{SeqBlocks{agent.blocks().data(), int32_t(agent.blocks().size())}, kPrefix};
  auto diff = SegmentDiff::extract(master, agent_seg, kPrefix, rows, DiffPacking{format, lm.model.get(), &pool});
  ASSERT_TRUE(diff);
  // The dense path's table: the prefix (shared, not timed) and the segment's scratch blocks.
  const KvSlotRange dense_all{SeqBlocks{dense.blocks().data(), int32_t(dense.blocks().size())}, 0};
  auto prefix = PackedKv::pack(m, KvSlotRange{agent_seg.blocks, 0}, kPrefix);
  ASSERT_TRUE(prefix);
  prefix->restore(dense_all);

  const int hd = cfg.head_dim, group = cfg.n_head / cfg.n_head_kv;
  const int64_t hi = kPrefix + kSeg - 1;
  const float scale = 1.0f / std::sqrt(float(hd));
  std::vector<float> q(size_t(cfg.n_head) * hd), out(q.size()), scratch(size_t(group) * size_t(hi + 1));
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (float& x : q) x = nd(rng);
  const auto attend_all = [&](int il, auto&& one_head) {
    for (int kvh = 0; kvh < cfg.n_head_kv; ++kvh) one_head(il, kvh, q.data() + kvh * group * hd, out.data() + kvh * group * hd);
  };
  // Each figure is the least of 5 rounds, the four measured in turn, so a busy spell of the shared
  // machine does not land on one side only.
  const auto materialize = [&] {
    ASSERT_TRUE(diff->materialize(*lm.model, KvSlotRange{dense_all.blocks, kPrefix}, pool).ok());
  };
  const auto dense_attention = [&] {
    for (int il = 0; il < cfg.n_layer; ++il)
      attend_all(il, [&](int l, int kvh, const float* qq, float* o) {
        attend_group(qq, group, arena.layer(l), dense.blocks().data(), 0, hi, kvh, hd, scale, o, scratch.data(),
                     cfg.attn_softcap);
      });
  };
  MasterDiffAttention view(*lm.model, arena, agent_seg.blocks, {{kPrefix, &*diff}});
  std::vector<AttentionSpan> spans;
  const auto prepare = [&] {
    for (int il = 0; il < cfg.n_layer; ++il) {
      view.prepare_layer(il, 0);
      spans.clear();
      view.spans(0, hi, spans);
    }
  };
  const auto fused = [&] {
    for (int il = 0; il < cfg.n_layer; ++il) {
      view.prepare_layer(il, 0);
      spans.clear();
      view.spans(0, hi, spans);
      attend_all(il, [&](int l, int kvh, const float* qq, float* o) {
        attend_spans(qq, group, arena.layer(l), spans, kvh, hd, scale, o, scratch.data(), cfg.attn_softcap);
      });
    }
  };
  double materialize_ms = 1e30, dense_attn_ms = 1e30, prepare_ms = 1e30, fused_ms = 1e30;
  for (int round = 0; round < 5; ++round) {
    materialize_ms = std::min(materialize_ms, ms_per_call(materialize));
    dense_attn_ms = std::min(dense_attn_ms, ms_per_call(dense_attention));
    prepare_ms = std::min(prepare_ms, ms_per_call(prepare));
    fused_ms = std::min(fused_ms, ms_per_call(fused));
  }
  const double dense_ms = materialize_ms + dense_attn_ms;
  std::printf("%s %s: context %d (segment %d, %zu diff rows), %d layers x %d KV heads x %d q heads/group, hd %d\n"
              "  dense:  materialize %.2f ms + attend_group %.2f ms = %.2f ms per decode step\n"
              "  fused:  %.2f ms per decode step, of which diff-row decode and spans %.2f ms\n"
              "  dense / fused = %.2fx; attention alone (fused less its decode vs attend_group) = %.2fx\n",
              name.c_str(), std::string(diff_format_name(format)).c_str(), kPrefix + kSeg, kSeg, rows.size(), cfg.n_layer,
              cfg.n_head_kv, group, hd, materialize_ms, dense_attn_ms, dense_ms, fused_ms,
              prepare_ms, dense_ms / fused_ms, (fused_ms - prepare_ms) / dense_attn_ms);
}

TEST(MasterDiffAttentionBench, DISABLED_FusedVsDenseRestoreDecodeStep) {
  for (const char* name : {"smollm2", "gemma3"})
    for (DiffFormat f : {DiffFormat::kF16, DiffFormat::kInt8}) bench(name, f);
}

}  // namespace
}  // namespace agentkv
