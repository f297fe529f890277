// `agentkv fit-prm` as a function: the policy proposes next steps for train problems (step_labels.h),
// the checker labels them, the KV-PRM reads the verify token's features and answer log-odds from the
// proposals' caches, a ridge logistic-regression probe is fitted on the features (and, as the
// untrained baseline, an affine calibration of the log-odds), and both are measured by AUROC on
// held-out problems.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "prm/calibration_file.h"
#include "prm/step_labels.h"

namespace agentkv::prm {

struct FitPrmOptions {
  int n_train = 48;    // train problems (indices 0..n-1 of the train split)
  int n_heldout = 32;  // held-out problems (indices 0..n-1 of the held-out split); 0: skip
  ProposeOptions sampling;
  std::string question = kProbeVerifyQuestion;
  std::string pos = "+", neg = "-";
  int feature_layer = 0;  // the block whose output the probe reads; 0: the last
  double l2 = 0.05;       // ridge strength on the standardised features
  // Also run the full pass for the answer tokens' log-odds and fit their calibration (the untrained
  // baseline); without it the verify pass stops after feature_layer.
  bool with_logodds = false;
  std::string steps_file;  // a fit-prm --dump file to take the proposals from instead of sampling
};

struct SplitFigures {
  int64_t n_problems = 0, n_proposals = 0;
  int64_t n_steps = 0, n_steps_correct = 0;
  double auroc = 0;          // of the probe
  double log_loss = 0;       // of the probe's probabilities
  double logodds_auroc = 0;  // of the answer tokens' log-odds alone (NaN without with_logodds)
  double seconds_sampling = 0, seconds_scoring = 0;
};

struct FitPrmReport {
  CalibrationRecord record;
  SplitFigures train, heldout;
  StepSet train_set, heldout_set;  // the labelled proposals, for inspection (fit-prm --dump)
};

// progress (may be empty) hears one line per phase.
Result<FitPrmReport> fit_prm(const LoadedModel& lm, const FitPrmOptions& opt, ThreadPool& pool,
                             const std::function<void(const std::string&)>& progress = {});

}  // namespace agentkv::prm
