// Fitting the verify head's affine calibration and measuring how well a score ranks steps.
#pragma once

#include <span>

#include "prm/verify_head.h"

namespace agentkv::prm {

// Logistic regression of label on one feature: P(correct) = sigmoid(a * x + b), fitted by Newton's
// method on the mean log-loss plus l2 * a^2 / 2 (the small ridge keeps a finite when the classes
// are separable). Labels are 0 / 1. With no examples or one class only, a = 0 and b is the
// clamped base-rate logit.
Calibration fit_logistic(std::span<const float> x, std::span<const int> label, double l2 = 1e-4);

// Mean log-loss of the calibration on (x, label).
double log_loss(const Calibration& c, std::span<const float> x, std::span<const int> label);

// Area under the ROC curve: the probability that a random positive scores above a random negative
// (ties count half), by ranks. NaN when a class is empty.
double auroc(std::span<const double> score, std::span<const int> label);
// The AUROC within groups: the share of (positive, negative) pairs of the same group, pooled over
// every group, that the score orders right (ties count one half). It is what choosing among one
// problem's candidates needs; a score can separate problems (easy from hard) and still rank a
// problem's own steps at chance. NaN when no group holds both labels.
// n_pairs (may be null) receives the number of pairs compared.
double within_group_auroc(std::span<const double> score, std::span<const int> label, std::span<const size_t> group,
                          int64_t* n_pairs = nullptr);

}  // namespace agentkv::prm
