#include "prm/verify_training.h"

#include <cmath>

#include "util/status.h"

namespace agentkv::prm {

void optimizer_step(const OptimizerOptions& opt, OptimizerState& state, std::span<float> params,
                    std::span<const float> grad) {
  AGENTKV_CHECK(params.size() == grad.size());
  if (opt.kind == OptimizerOptions::Kind::kSgd) {
    for (size_t i = 0; i < params.size(); ++i) params[i] -= float(opt.lr * double(grad[i]));
    return;
  }
  if (state.m.size() != params.size()) {
    state.m.assign(params.size(), 0.0f);
    state.v.assign(params.size(), 0.0f);
    state.t = 0;
  }
  ++state.t;
  const double c1 = 1.0 - std::pow(opt.beta1, double(state.t)), c2 = 1.0 - std::pow(opt.beta2, double(state.t));
  for (size_t i = 0; i < params.size(); ++i) {
    const double g = grad[i];
    const double m = opt.beta1 * state.m[i] + (1.0 - opt.beta1) * g;
    const double v = opt.beta2 * state.v[i] + (1.0 - opt.beta2) * g * g;
    state.m[i] = float(m);
    state.v[i] = float(v);
    params[i] -= float(opt.lr * (m / c1) / (std::sqrt(v / c2) + opt.eps));
  }
}

Result<StepResult> train_step(const Model& model, std::span<const VerifyExample> batch, const VerifyHead& head,
                              LoraAdapters& adapters, VerifyLoss loss, const OptimizerOptions& opt,
                              OptimizerState& state, ThreadPool& pool) {
  if (batch.empty()) return make_error("train step: empty batch");
  LoraAdapters grad = adapters.zeros_like();
  StepResult out;
  for (const VerifyExample& ex : batch) {
    if (!ex.ctx) return make_error("train step: an example has no context");
    auto r = verify_pass(model, *ex.ctx, head, adapters, ex.target, loss, &grad, pool);
    if (!r.ok()) return r.status_error();
    out.mean_loss += r->loss;
    out.p_pos.push_back(r->p_pos);
  }
  const double inv = 1.0 / double(batch.size());
  out.mean_loss *= inv;
  for (float& g : grad.params()) g = float(double(g) * inv);
  optimizer_step(opt, state, adapters.params(), grad.params());
  return out;
}

}  // namespace agentkv::prm
