// Fitting the verifier's adapters: a step of SGD or Adam on the mean loss of a batch of verify
// passes (verify_pass.h), each scoring its own policy context against its own target.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "prm/verify_pass.h"

namespace agentkv::prm {

struct OptimizerOptions {
  enum class Kind { kSgd, kAdam };
  Kind kind = Kind::kAdam;
  double lr = 1e-3;
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;  // Adam's
};

// Adam's moments and step count (empty for SGD until used), shaped like the parameters.
struct OptimizerState {
  std::vector<float> m, v;
  int64_t t = 0;
};

// params -= lr * grad (SGD) or Adam's bias-corrected update.
void optimizer_step(const OptimizerOptions& opt, OptimizerState& state, std::span<float> params,
                    std::span<const float> grad);

struct VerifyExample {
  const VerifyContext* ctx = nullptr;
  double target = 0;  // in [0, 1]: a hard label or a Monte-Carlo step value
};

struct StepResult {
  double mean_loss = 0;          // before the update
  std::vector<double> p_pos;     // per example, before the update
  int64_t pairs = 0;             // kPairwise: the batch's pairs of different targets
};

// The batch's loss with `adapters` (before any update) and, with grad non-null (the adapters'
// shape, zeroed by the caller), its gradient added into grad. Per-example losses are averaged; the
// pairwise loss is the batch's own (VerifyLoss::kPairwise), 0 with no gradient for a batch without a
// pair of different targets (StepResult::pairs says how many it had).
Result<StepResult> batch_gradient(const Model& model, std::span<const VerifyExample> batch, const VerifyHead& head,
                                  const LoraAdapters& adapters, VerifyLoss loss, LoraAdapters* grad, ThreadPool& pool);

// One update of `adapters` on the batch's loss (batch_gradient); no update for a pairwise batch
// without a pair.
Result<StepResult> train_step(const Model& model, std::span<const VerifyExample> batch, const VerifyHead& head,
                              LoraAdapters& adapters, VerifyLoss loss, const OptimizerOptions& opt,
                              OptimizerState& state, ThreadPool& pool);

}  // namespace agentkv::prm
