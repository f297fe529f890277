#include "lab/prm/scoring_bench.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "lab/prm/forward_flops.h"
#include "prm/kv_scorer.h"
#include "kv/direct_prefill.h"

namespace agentkv::prm {
namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

template <class F>
Result<double> timed(F&& f) {
  const auto t0 = std::chrono::steady_clock::now();
  if (Status st = f(); !st.ok()) return make_error(st.error());
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

Result<std::vector<ScoringCost>> measure_scoring_cost(const LoadedModel& lm, std::span<const int32_t> trajectory,
                                                      std::span<const int64_t> lengths, const VerifyHead& head,
                                                      int repeats, ThreadPool& pool) {
  if (repeats < 1) return make_error("measure_scoring_cost: repeats must be positive");
  const ModelConfig& c = lm.config();
  const int64_t n_verify = int64_t(head.tokens.size());
  std::vector<ScoringCost> out;
  for (int64_t len : lengths) {
    if (len < 1 || size_t(len) > trajectory.size())
      return make_error("measure_scoring_cost: length " + std::to_string(len) + " exceeds the trajectory (" +
                        std::to_string(trajectory.size()) + " tokens)");
    if (len + n_verify > c.n_ctx_train)
      return make_error("measure_scoring_cost: length " + std::to_string(len) + " exceeds the model's context");
    KvManagerOptions ko;
    ko.prefix_caching = false;
    ko.mem_bytes = int64_t(512) << 20;
    auto kv = KvManager::create(c, lm.fingerprint, ko);
    if (!kv.ok()) return make_error(kv.error());
    const std::span<const int32_t> traj = trajectory.first(size_t(len));
    KvSequence policy(**kv);
    if (Status st = prefill_sequence(*lm.model, **kv, policy, traj, pool); !st.ok()) return make_error(st.error());
    ScoringCost cost;
    cost.trajectory_tokens = len;
    const KvSequence* ctx[] = {&policy};
    const std::vector<std::vector<int32_t>> texts = {std::vector<int32_t>(traj.begin(), traj.end())};
    std::vector<double> kv_t, text_t;
    PrmScores kv_s, text_s;
    for (int r = 0; r < repeats; ++r) {
      auto t = timed([&]() -> Status {
        auto s = kv_prm_score(*lm.model, **kv, ctx, head, pool);
        if (!s.ok()) return make_error(s.error());
        kv_s = std::move(*s);
        return {};
      });
      if (!t.ok()) return make_error(t.error());
      kv_t.push_back(*t);
      t = timed([&]() -> Status {
        auto s = text_prm_score(*lm.model, **kv, texts, head, pool);
        if (!s.ok()) return make_error(s.error());
        text_s = std::move(*s);
        return {};
      });
      if (!t.ok()) return make_error(t.error());
      text_t.push_back(*t);
    }
    cost.kv_seconds = median(kv_t);
    cost.text_seconds = median(text_t);
    // A probe-only head stops both passes after its layer and reads no logits.
    ModelConfig run = c;
    if (!head.read_logits) run.n_layer = head.feature_layer;
    const int64_t rows = head.read_logits ? 1 : 0;
    cost.kv_flops = forward_flops(run, len, n_verify, rows);
    cost.text_flops = forward_flops(run, 0, len + n_verify, rows);
    // The KV-PRM's fork needs only the verify tokens' blocks (and a copy of a shared partial last
    // block); the text PRM holds the whole re-encoded trajectory.
    const KvSequence fork = policy.fork();
    cost.kv_bytes = fork.blocks_needed(n_verify) * (*kv)->bytes_per_block();
    cost.text_bytes = ((len + n_verify + (*kv)->block_size() - 1) / (*kv)->block_size()) * (*kv)->bytes_per_block();
    cost.score_delta = std::fabs(kv_s.score[0] - text_s.score[0]);
    out.push_back(cost);
  }
  return out;
}

}  // namespace agentkv::prm
