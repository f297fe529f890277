// `agentkv fit-prm` as a function: sample candidate solutions to train problems, label their steps
// with the checker, score them with the KV-PRM, fit the calibration by logistic regression, and
// measure the AUROC of the fitted head on held-out problems.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "prm/calibration_file.h"
#include "prm/step_dataset.h"

namespace agentkv::prm {

struct FitPrmOptions {
  int n_train = 48;           // train problems (indices 0..n-1 of the train split)
  int n_heldout = 32;         // held-out problems (indices 0..n-1 of the held-out split); 0: skip
  SampleOptions sampling;
  std::string question = kDefaultVerifyQuestion;
  std::string pos = "+", neg = "-";
};

struct SplitFigures {
  int64_t n_problems = 0, n_candidates = 0, n_answers_correct = 0;
  int64_t n_steps = 0, n_steps_correct = 0;
  double auroc = 0;     // of the calibrated score (the same ranking as the raw log-odds when a > 0)
  double log_loss = 0;  // of the calibrated probabilities
  double seconds_sampling = 0, seconds_scoring = 0;
};

struct FitPrmReport {
  CalibrationRecord record;
  SplitFigures train, heldout;
};

// progress (may be empty) hears one line per phase.
Result<FitPrmReport> fit_prm(const LoadedModel& lm, const FitPrmOptions& opt, ThreadPool& pool,
                             const std::function<void(const std::string&)>& progress = {});

}  // namespace agentkv::prm
