#include "prm/kv_scorer.h"

#include <algorithm>
#include <limits>

#include "kv/direct_prefill.h"
#include "prm/step_probe.h"

namespace agentkv::prm {
namespace {

// Appends the scores of `rows` candidates from their verify pass's logits and hidden states; the
// features are the hidden states divided by their RMS (step_probe.h), normalised here in place.
void add_scores(PrmScores& out, const VerifyHead& head, size_t rows, const std::vector<float>& logits,
                std::vector<float>& features, std::vector<float>& every_layer, const ModelConfig& c) {
  const size_t n_vocab = size_t(c.n_vocab), d = head.feature_layer > 0 ? size_t(c.n_embd) : 0;
  rms_normalize_rows(features.data(), int64_t(d ? rows : 0), int64_t(d), c.rms_eps);
  rms_normalize_rows(every_layer.data(), int64_t(every_layer.size() / size_t(c.n_embd)), c.n_embd, c.rms_eps);
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

// One forward over the verify tokens of contexts [first, last), appended to forks of them that are
// never committed; appends their scores.
Status score_group(const Model& model, KvManager& kv, std::span<const KvSequence* const> contexts, size_t first,
                   size_t last, const VerifyHead& head, ThreadPool& pool, PrmScores& out) {
  std::vector<KvSequence> forks;
  forks.reserve(last - first);  // the pass points into each fork's block table
  std::vector<KvSequence*> seqs;
  for (size_t c = first; c < last; ++c) {
    const KvSequence& ctx = *contexts[c];
    if (ctx.n_tokens() == 0) return make_error("kv_prm_score: context " + std::to_string(c) + " is empty");
    forks.push_back(ctx.fork());
    seqs.push_back(&forks.back());
  }
  const std::vector<std::span<const int32_t>> tokens(seqs.size(), head.tokens);
  std::vector<float> logits, features, every_layer;
  // All prefill kernels: the same numerics as the text PRM's re-encoding of these tokens. The forks
  // go out of scope uncommitted: their private blocks return to the pool and the verify tokens never
  // enter the prefix index.
  AGENTKV_TRY(prefill_together(model, kv, seqs, tokens, pool, row_outputs(head, logits, features, every_layer),
                               PrefillOptions{.commit = false, .row_adapters = head.adapters.get()}));
  add_scores(out, head, forks.size(), logits, features, every_layer, model.config());
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
    // Adapted K/V of the verify token never enter the scratch manager's prefix index.
    const PrefillOptions opt{.commit = head.adapters == nullptr, .row_adapters = head.adapters.get()};
    if (Status st = prefill_sequence(model, scratch_kv, seq, tokens, pool,
                                     row_outputs(head, logits, features, every_layer), opt);
        !st.ok())
      return st.status_error();
    add_scores(out, head, 1, logits, features, every_layer, model.config());
  }
  return out;
}

}  // namespace agentkv::prm
