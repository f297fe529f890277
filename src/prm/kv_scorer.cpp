#include "prm/kv_scorer.h"

#include <algorithm>
#include <limits>

#include "prm/sequence_prefill.h"

namespace agentkv::prm {
namespace {

// Appends the scores of `rows` candidates from their verify pass's logits and features.
void add_scores(PrmScores& out, const VerifyHead& head, size_t rows, const std::vector<float>& logits,
                const std::vector<float>& features, const std::vector<float>& every_layer, size_t n_vocab,
                size_t d) {
  out.every_layer.insert(out.every_layer.end(), every_layer.begin(), every_layer.end());
  out.n_features = int(d);
  for (size_t i = 0; i < rows; ++i) {
    const float x = head.read_logits ? verify_logodds(head, logits.data() + i * n_vocab)
                                     : std::numeric_limits<float>::quiet_NaN();
    const float* f = d ? features.data() + i * d : nullptr;
    out.logodds.push_back(x);
    out.score.push_back(head.score(x, f));
    if (d) out.features.insert(out.features.end(), f, f + d);
  }
}

RowOutputs row_outputs(const VerifyHead& head, std::vector<float>& logits, std::vector<float>& features,
                       std::vector<float>& every_layer) {
  if (!head.read_logits && !head.every_layer)
    return RowOutputs{nullptr, &features, head.feature_layer, head.feature_layer};
  return RowOutputs{&logits, head.feature_layer > 0 ? &features : nullptr, head.feature_layer, 0,
                    head.every_layer ? &every_layer : nullptr};
}

// One forward over the verify tokens of contexts [first, last); appends their scores.
Status score_group(const Model& model, KvManager& kv, std::span<const KvSequence* const> contexts, size_t first,
                   size_t last, const VerifyHead& head, ThreadPool& pool, PrmScores& out) {
  const int64_t n_verify = int64_t(head.tokens.size());
  std::vector<KvSequence> forks;
  forks.reserve(last - first);  // the batch points into each fork's block table
  Batch batch;
  for (size_t c = first; c < last; ++c) {
    const KvSequence& ctx = *contexts[c];
    if (ctx.n_tokens() == 0) return make_error("kv_prm_score: context " + std::to_string(c) + " is empty");
    forks.push_back(ctx.fork());
    if (!forks.back().reserve(n_verify))
      return make_error("kv_prm_score: the KV pool has no room for the verify tokens of " +
                        std::to_string(last - first) + " candidates");
  }
  for (size_t i = 0; i < forks.size(); ++i) {
    const KvSequence& f = forks[i];
    batch.seqs.push_back(SeqBlocks{f.blocks().data(), int32_t(f.blocks().size())});
    const int32_t base = int32_t(f.n_tokens());
    for (int64_t t = 0; t < n_verify; ++t)
      batch.add(head.tokens[size_t(t)], base + int32_t(t), int32_t(i), base + int32_t(t), t + 1 == n_verify);
  }
  // All prefill kernels: the same numerics as the text PRM's re-encoding of these tokens.
  batch.n_tile_tokens = 0;
  std::vector<float> logits, features, every_layer;
  if (Status st = forward_rows(model, batch, kv.arena(), pool, row_outputs(head, logits, features, every_layer));
      !st.ok())
    return st;
  add_scores(out, head, forks.size(), logits, features, every_layer, size_t(model.config().n_vocab),
             head.feature_layer > 0 ? size_t(model.config().n_embd) : 0);
  // The forks go out of scope uncommitted: their private blocks return to the pool and the verify
  // tokens never enter the prefix index.
  return {};
}

}  // namespace

Result<PrmScores> kv_prm_score(const Model& model, KvManager& kv, std::span<const KvSequence* const> contexts,
                               const VerifyHead& head, ThreadPool& pool, int max_per_forward) {
  if (head.tokens.empty()) return make_error("kv_prm_score: the verify head has no tokens");
  PrmScores out;
  const size_t group = max_per_forward > 0 ? size_t(max_per_forward) : std::max<size_t>(contexts.size(), 1);
  for (size_t first = 0; first < contexts.size(); first += group) {
    const size_t last = std::min(contexts.size(), first + group);
    if (Status st = score_group(model, kv, contexts, first, last, head, pool, out); !st.ok())
      return st.status_error();
  }
  return out;
}

Result<PrmScores> text_prm_score(const Model& model, KvManager& scratch_kv,
                                 std::span<const std::vector<int32_t>> trajectories, const VerifyHead& head,
                                 ThreadPool& pool) {
  if (head.tokens.empty()) return make_error("text_prm_score: the verify head has no tokens");
  PrmScores out;
  std::vector<int32_t> tokens;
  std::vector<float> logits, features, every_layer;
  for (const std::vector<int32_t>& traj : trajectories) {
    tokens = traj;
    tokens.insert(tokens.end(), head.tokens.begin(), head.tokens.end());
    KvSequence seq(scratch_kv);
    if (Status st = prefill_sequence(model, scratch_kv, seq, tokens, pool,
                                     row_outputs(head, logits, features, every_layer));
        !st.ok())
      return st.status_error();
    add_scores(out, head, 1, logits, features, every_layer, size_t(model.config().n_vocab),
               head.feature_layer > 0 ? size_t(model.config().n_embd) : 0);
  }
  return out;
}

}  // namespace agentkv::prm
