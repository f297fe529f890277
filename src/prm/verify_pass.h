// The verifier's training pass (KV-PRM, arXiv 2607.09153): the last verify token alone runs with the
// low-rank adapters on, attending to a policy context's cached K/V (frozen, base weights), and the
// loss on P("+") over {"+", "-"} is backpropagated through every block into the adapters only. The
// trajectory is never re-encoded: one example costs one token's forward and backward.
//
// It reads the weights the model's forward runs on (Model::weights) and follows the same blocks, but
// in plain float (ops/float_matvec.h, a float softmax, GELU without the f16 table, the token's own K/V
// unrounded), so the loss is smooth in the adapters and its gradient checks against finite
// differences. Scoring (kv_scorer.h with VerifyHead::adapters) runs the serving kernels instead; the
// two agree up to those kernels' rounding.
#pragma once

#include <span>
#include <vector>

#include "kv/kv_manager.h"
#include "model/lora_adapters.h"
#include "model/model.h"
#include "prm/verify_head.h"
#include "util/status.h"
#include "util/thread_pool.h"

namespace agentkv::prm {

// A policy context readied for training: a fork of it that also holds the verify tokens but the
// last, run with the base weights and never committed. The verify token attends to its n_slots
// cached slots and sits at position n_slots.
struct VerifyContext {
  KvSequence fork;
  int64_t n_slots = 0;
};

// One VerifyContext per context, their verify prefixes written in one pass. Fails, with nothing
// held, when a context is empty or the pool lacks the blocks.
Result<std::vector<VerifyContext>> prepare_verify_contexts(const Model& model, KvManager& kv,
                                                           std::span<const KvSequence* const> contexts,
                                                           const VerifyHead& head, ThreadPool& pool);

enum class VerifyLoss {
  kSquaredError,  // (P("+") - target)^2, the paper's choice against Monte-Carlo step values
  kCrossEntropy,  // -target log P("+") - (1 - target) log(1 - P("+"))
  // A batch's loss, not one example's (verify_training.h's batch_gradient): over the pairs (i, j) of
  // a batch with target_i > target_j, the mean of softplus(-(logodds_i - logodds_j)) weighted by
  // target_i - target_j: a logistic ranking loss, AUROC's smooth surrogate. A shift of every
  // log-odds alike leaves it unchanged, so the update moves only what separates the steps.
  kPairwise,
};

struct VerifyOutput {
  double logodds = 0;  // logit("+") - logit("-") of the verify token
  double p_pos = 0;    // sigmoid(logodds) = P("+") over {"+", "-"}
  double loss = 0;
};

// The verify token's pass over ctx with `adapters` on, and the loss against target (in [0, 1]).
// With grad non-null (adapters' shape), adds dloss/dparameters into it. kPairwise is a batch's loss:
// refused here (verify_training.h's batch_gradient computes it).
Result<VerifyOutput> verify_pass(const Model& model, const VerifyContext& ctx, const VerifyHead& head,
                                 const LoraAdapters& adapters, double target, VerifyLoss loss, LoraAdapters* grad,
                                 ThreadPool& pool);

}  // namespace agentkv::prm
