// The trained verifier head: a ridge-regularised logistic-regression probe on the verify token's
// hidden state. Features are the residual stream at the last verify token after block `layer - 1`
// (layer == n_layer: the final one), divided by its RMS. That is the model's final norm without its
// per-feature gain, which the probe's standardisation absorbs anyway, so the same code serves any
// layer. Both the KV-PRM and the text PRM compute these features, so "same model, same head" holds.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace agentkv::prm {

struct StepProbe {
  int layer = 0;                // the block count whose output is read (1..n_layer)
  std::vector<float> mean;      // per feature, of the train set
  std::vector<float> inv_std;   // per feature, 1 / (std + eps) of the train set
  std::vector<double> weight;   // on the standardised features
  double bias = 0;
  double l2 = 0;                // the ridge strength it was fitted with

  int n_features() const { return int(weight.size()); }
  // The log-odds that the step is correct.
  double apply(const float* features) const;
};

// The logistic function and log(1 + e^z), both without overflow: a probe's and a verifier's loss.
double sigmoid(double z);
double softplus(double z);

// Divides each row of x ([n][d]) by its RMS, in place (eps as in the model's RMS norm).
void rms_normalize_rows(float* x, int64_t n, int64_t d, float eps = 1e-5f);

// Fits P(correct) = sigmoid(w . z + b) on standardised features z by Newton's method on the mean
// log-loss + l2 / 2 * |w|^2 (the intercept is not penalised). features is [n][d], labels 0 / 1.
// With one class only, w = 0 and b is the clamped base-rate logit.
StepProbe fit_step_probe(std::span<const float> features, std::span<const int> labels, int layer, double l2);

// The probe's log-odds for each row of features ([n][probe.n_features()]).
std::vector<double> apply_probe(const StepProbe& probe, std::span<const float> features);

}  // namespace agentkv::prm
