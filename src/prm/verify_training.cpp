#include "prm/verify_training.h"

#include <cmath>

#include "prm/verify_pass_record.h"
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

namespace {

// dloss/dlogodds of each example under the pairwise loss, its value, and the pairs counted.
double pairwise_loss(std::span<const VerifyExample> batch, std::span<const double> logodds, std::vector<double>& dl,
                     int64_t& pairs) {
  dl.assign(batch.size(), 0.0);
  double weight = 0, loss = 0;
  pairs = 0;
  for (size_t i = 0; i < batch.size(); ++i)
    for (size_t j = 0; j < batch.size(); ++j) {
      const double w = batch[i].target - batch[j].target;
      if (!(w > 0)) continue;
      const double d = logodds[i] - logodds[j];
      loss += w * (d > 0 ? std::log1p(std::exp(-d)) : -d + std::log1p(std::exp(d)));  // softplus(-d)
      const double g = w / (1.0 + std::exp(d));  // w * sigmoid(-d)
      dl[i] -= g;
      dl[j] += g;
      weight += w;
      ++pairs;
    }
  if (weight == 0) return 0;
  for (double& x : dl) x /= weight;
  return loss / weight;
}

}  // namespace

Result<StepResult> batch_gradient(const Model& model, std::span<const VerifyExample> batch, const VerifyHead& head,
                                  const LoraAdapters& adapters, VerifyLoss loss, LoraAdapters* grad, ThreadPool& pool) {
  if (batch.empty()) return make_error("train step: empty batch");
  for (const VerifyExample& ex : batch) {
    if (!ex.ctx) return make_error("train step: an example has no context");
    AGENTKV_TRY(check_pass_inputs(model, *ex.ctx, head, adapters, ex.target, grad));
  }
  StepResult out;
  // Every forward first (the pairwise loss needs every log-odds before any backward), the batch's
  // weight rows dequantized once; then the backwards of the examples with a gradient, together.
  std::vector<const VerifyContext*> ctxs;
  for (const VerifyExample& ex : batch) ctxs.push_back(ex.ctx);
  const std::vector<PassRecord> recs = forward_pass_many(model, ctxs, head, adapters, pool);
  std::vector<double> logodds, dl;
  for (const PassRecord& rec : recs) {
    logodds.push_back(rec.logodds);
    out.p_pos.push_back(1.0 / (1.0 + std::exp(-rec.logodds)));
  }
  LoraAdapters mean_grad;  // the per-example losses' gradient, summed, then scaled into grad
  if (loss == VerifyLoss::kPairwise) {
    out.mean_loss = pairwise_loss(batch, logodds, dl, out.pairs);
    if (!grad || out.pairs == 0) return out;
  } else {
    const double inv = 1.0 / double(batch.size());
    for (size_t i = 0; i < batch.size(); ++i) {
      const LossValue l = verify_loss(logodds[i], batch[i].target, loss);
      out.mean_loss += l.loss * inv;
      out.p_pos[i] = l.p;
      dl.push_back(l.dlogodds);
    }
    if (!grad) return out;
    mean_grad = adapters.zeros_like();
  }
  std::vector<const VerifyContext*> back_ctxs;
  std::vector<const PassRecord*> back_recs;
  std::vector<double> back_dl;
  for (size_t i = 0; i < batch.size(); ++i)
    if (dl[i] != 0) {
      back_ctxs.push_back(ctxs[i]);
      back_recs.push_back(&recs[i]);
      back_dl.push_back(dl[i]);
    }
  LoraAdapters& into = loss == VerifyLoss::kPairwise ? *grad : mean_grad;
  backward_pass_many(model, back_ctxs, head, adapters, back_recs, back_dl, into, pool);
  if (loss != VerifyLoss::kPairwise) {
    const double inv = 1.0 / double(batch.size());
    for (size_t i = 0; i < mean_grad.params().size(); ++i) grad->params()[i] += float(double(mean_grad.params()[i]) * inv);
  }
  return out;
}

Result<StepResult> train_step(const Model& model, std::span<const VerifyExample> batch, const VerifyHead& head,
                              LoraAdapters& adapters, VerifyLoss loss, const OptimizerOptions& opt,
                              OptimizerState& state, ThreadPool& pool) {
  LoraAdapters grad = adapters.zeros_like();
  auto out = batch_gradient(model, batch, head, adapters, loss, &grad, pool);
  if (!out.ok()) return out;
  if (loss == VerifyLoss::kPairwise && out->pairs == 0) return out;
  optimizer_step(opt, state, adapters.params(), grad.params());
  return out;
}

}  // namespace agentkv::prm
