// `agentkv fit-prm` as a function: the policy proposes next steps for train problems (step_labels.h),
// the checker labels them, the KV-PRM reads the verify token's features and answer log-odds from the
// proposals' caches, a ridge logistic-regression probe is fitted on the features (and, as the
// untrained baseline, an affine calibration of the log-odds), and both are measured by AUROC on
// held-out problems.
#pragma once

#include <array>
#include <cmath>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "lab/prm/fit_lora.h"
#include "prm/adapter_file.h"
#include "prm/calibration_file.h"
#include "lab/prm/step_labels.h"

namespace agentkv::prm {

struct FitPrmOptions {
  int n_train = 48;    // train problems (indices 0..n-1 of the train split)
  int n_heldout = 32;  // held-out problems (indices 0..n-1 of the held-out split); 0: skip
  ProposeOptions sampling;
  std::string question = kDefaultVerifyQuestion;
  std::string pos = "+", neg = "-";
  // The block whose output the probe reads (0: the last) and the ridge strength: the values that
  // fit-prm's cross-validated sweep chose on SmolLM2 (BENCHMARKS.md).
  int feature_layer = 8;
  double l2 = 0.01;
  // Also run the full pass for the answer tokens' log-odds and fit their calibration (the untrained
  // baseline); without it the verify pass stops after feature_layer.
  bool with_logodds = false;
  std::string steps_file;  // a fit-prm --dump file to take the proposals from instead of sampling
  // Step proposals: also after the whole reference, answer lines kept as examples (StepSet::with_answers).
  bool with_answers = false;
  // With with_answers: also the answer line search --offer-answer offers after each reference prefix
  // (sample_labelled_steps' offered_answers).
  bool offered_answers = false;
  // True: the examples are the policy's own whole solutions (sampling.n per problem, at most
  // solution_max_tokens long), each labelled by its final answer, the verify token after the answer
  // line (solution_examples.h), instead of one-line proposals after reference prefixes.
  bool solutions = false;
  int solution_max_tokens = 96;
  // With solutions: the train split also holds each problem's reference solution and this many
  // altered copies (add_reference_solutions); held-out stays the policy's solutions only.
  int reference_copies = -1;  // -1: no reference solutions
  ArithShape shape;        // the problems' operations (the task's 2..3 by default)
  // Model selection: when both are set, feature_layer and l2 are chosen among these by 4-fold
  // cross-validated AUROC on the train problems (folds by problem); held-out stays untouched.
  std::vector<int> sweep_layers;
  std::vector<double> sweep_l2;
};

// The step beam's stop decisions (stop_role) on a set, each an AUROC over pairs of one prefix (problem, k):
// right next steps above wrong answer lines before the reference's end (go on), and right answer lines above
// further steps after it (stop). NaN where a set has no such pair.
struct StopDecisions {
  double go_on_auroc = std::nan(""), stop_auroc = std::nan("");
  int64_t n_go_on_pairs = 0, n_stop_pairs = 0;
};

struct SplitFigures {
  int64_t n_problems = 0, n_proposals = 0;
  int64_t n_offered = 0;  // of n_proposals, answer lines offered after a reference prefix (offered_answers)
  int64_t n_steps = 0, n_steps_correct = 0;
  double auroc = 0;          // of the probe
  double log_loss = 0;       // of the probe's probabilities
  double logodds_auroc = 0;  // of the answer tokens' log-odds alone (NaN without with_logodds)
  // The same two within a problem (within_group_auroc: only a problem's own steps compared), as
  // choosing among a problem's candidates needs. fit_prm_lora's only; NaN where not measured.
  double within_auroc = std::nan(""), logodds_within_auroc = std::nan("");
  int64_t n_within_pairs = 0;  // the (correct, wrong) pairs of the same problem they compare
  // fit_prm_lora on a set with answer lines (StepSet::with_answers): the adapted AUROC, pooled and within a
  // problem, on the steps before the reference's end alone (is_step_before_end), the pool a step verifier
  // without answer lines is measured on; NaN otherwise.
  double steps_auroc = std::nan(""), steps_within_auroc = std::nan("");
  int64_t n_steps_before_end = 0, n_steps_before_end_correct = 0;
  // The same sets: the step beam's stop decisions, with the adapters and without.
  StopDecisions stops, logodds_stops;
  double seconds_sampling = 0, seconds_scoring = 0;
  // Per kind of error (StepError, index 0 unused): the wrong steps of that kind, and the probe's
  // AUROC of the correct steps against them alone (NaN without both): which mistakes it can see.
  std::array<int64_t, kStepErrorKinds> n_by_error{};
  std::array<double, kStepErrorKinds> auroc_by_error{};
};

// The AUROC of the correct steps (y == 1) against the wrong steps of each error kind alone.
std::array<double, kStepErrorKinds> auroc_by_error(std::span<const double> z, std::span<const int> y,
                                                   std::span<const StepError> error);

// "format 0.7795 (32) arithmetic 0.4683 (46) ...": the per-kind AUROCs and counts, for reports.
std::string auroc_by_error_text(const SplitFigures& f);

struct FitPrmReport {
  CalibrationRecord record;
  SplitFigures train, heldout;
  StepSet train_set, heldout_set;  // the labelled proposals, for inspection (fit-prm --dump)
};

// progress (may be empty) hears one line per phase.
Result<FitPrmReport> fit_prm(const LoadedModel& lm, const FitPrmOptions& opt, ThreadPool& pool,
                             const std::function<void(const std::string&)>& progress = {});

struct FitPrmLoraReport {
  LoraAdapters adapters;
  AdapterRecord record;
  LoraFitFigures fit;
  // auroc: of P("+") with the adapters (scored as served); logodds_auroc: without them. Against the
  // checker's labels on both splits, whatever the train targets were.
  SplitFigures train, heldout;
  std::vector<double> train_values;  // the Monte-Carlo step values trained on (lora.rollouts.n > 0)
  double values_auroc = std::nan("");  // their AUROC against the checker's train labels
};

// `agentkv fit-prm --lora`: the same labelled steps as fit_prm (sampled, or from opt.steps_file),
// LoRA adapters trained on the verify token against the labels (or, with lora.rollouts.n > 0, the
// steps' Monte-Carlo values) instead of a probe, and the train and held-out AUROC of the verify
// answer with and without them. opt's probe settings are not used.
Result<FitPrmLoraReport> fit_prm_lora(const LoadedModel& lm, const FitPrmOptions& opt, const FitLoraOptions& lora,
                                      ThreadPool& pool, const std::function<void(const std::string&)>& progress = {});

}  // namespace agentkv::prm
