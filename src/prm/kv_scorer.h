// Step scoring two ways, with the same model and the same verify head:
//   KV-PRM:   each policy context (a KvSequence whose K/V already exist) is forked, the verify
//             tokens are appended to the fork and only they are run, all candidates in one batched
//             forward; then the forks are released. O(verify tokens) per score, no re-encoding.
//   text PRM: the whole trajectory plus the verify tokens is encoded from scratch for each score
//             (a verifier that cannot read the policy's cache): O(L) tokens per score, O(L^2) for
//             all steps of a trajectory.
// With VerifyHead::adapters both run the last verify token with the verifier's low-rank adapters on
// and every other token (the policy's cache included) on the base weights.
// Both run in batch-invariant mode with the prefill kernels (kv/direct_prefill.h), so when the
// contexts' K/V were also written by prefill_sequence the two give bit-identical log-odds,
// features and scores.
#pragma once

#include <span>
#include <vector>

#include "kv/kv_manager.h"
#include "model/model.h"
#include "prm/verify_head.h"

namespace agentkv::prm {

struct PrmScores {
  std::vector<float> logodds;  // log p(pos) / p(neg) at the last verify token, per candidate
  std::vector<double> score;   // the head's score (probe, else calibrated logodds), per candidate
  std::vector<float> features; // [candidates][n_features] when head.feature_layer > 0
  int n_features = 0;
  std::vector<float> every_layer;  // [candidates][n_layer][n_embd] when head.every_layer
};

// Every context must belong to `kv` and hold at least one token. The policy's blocks are never
// written: a fork shares them and reserve copies a shared partial last block before the verify
// tokens land in it. max_per_forward > 0 caps the candidates per forward pass (memory); 0 puts all
// of them in one. Fails, with every fork released, when the pool lacks the blocks.
Result<PrmScores> kv_prm_score(const Model& model, KvManager& kv, std::span<const KvSequence* const> contexts,
                               const VerifyHead& head, ThreadPool& pool, int max_per_forward = 0);

// `scratch_kv` holds each re-encoding while it runs (prefix caching should be off there, or the
// baseline would reuse earlier trajectories' blocks and stop being the O(L^2) path).
Result<PrmScores> text_prm_score(const Model& model, KvManager& scratch_kv,
                                 std::span<const std::vector<int32_t>> trajectories, const VerifyHead& head,
                                 ThreadPool& pool);

}  // namespace agentkv::prm
