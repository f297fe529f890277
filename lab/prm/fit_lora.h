// Fitting the verifier's LoRA adapters on labelled steps (KV-PRM, arXiv 2607.09153): for every
// proposed step the policy's context is written with the base weights, the verify question after it
// too, and only the verify token runs with the adapters on; its P("+") is pulled towards the step's
// label by SGD or Adam over the adapters (prm/verify_training.h). The trajectory is never re-encoded.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "lab/prm/step_labels.h"
#include "lab/prm/step_values.h"
#include "prm/verify_training.h"

namespace agentkv::prm {

struct FitLoraOptions {
  int rank = 8;
  float alpha = 16.0f;  // scale = alpha / rank
  int epochs = 1;
  int batch = 8;        // examples per optimizer step
  // Pairwise by default: chosen by held-out AUROC (0.80 against 0.47-0.50 for mse and bce on the
  // same one-operation split, BENCHMARKS.md).
  VerifyLoss loss = VerifyLoss::kPairwise;
  OptimizerOptions optimizer;
  uint64_t seed = 1;    // A's initialisation and the order of examples
  int64_t kv_mem_bytes = int64_t(1) << 30;
  // The train contexts built in the first epoch are kept for the later ones, group by group (of
  // kStepGroupProblems problems), while the KV in use stays within this share of kv_mem_bytes; the
  // groups not kept are built again every epoch. The fit is the same either way, bit for bit. 0: none kept.
  double keep_contexts_share = 0.5;
  // The targets: with rollouts.n > 0 each train step's Monte-Carlo value (step_values.h), the
  // paper's; with 0 the checker's hard label.
  RolloutOptions rollouts{.n = 0};
  // In [0, 1): with d > 0 the adapters returned (and scored after each epoch) are an exponential
  // moving average of the optimizer's iterates, avg = d * avg + (1 - d) * params after every update
  // (Polyak-Ruppert averaging; it damps the epoch-to-epoch swings of a small noisy fit). 0: the last
  // iterate.
  double average_decay = 0;
  // True: every batch holds one problem's steps (all of them, whatever `batch` says), so a pairwise
  // loss compares only steps of the same problem, as best-of-N compares a problem's candidates;
  // false: batches of `batch` steps shuffled across the problems of a group.
  bool batch_by_problem = false;
  // Optional: called after every epoch with the adapters as they are then (e.g. the held-out AUROC,
  // reported per epoch; never used to choose the epoch).
  std::function<Result<double>(const LoraAdapters&)> after_epoch;
};

struct LoraFitFigures {
  std::vector<double> epoch_loss;  // mean training loss per epoch (before each step's update)
  // Per epoch, the AUROC of the training pass's P("+") (before each step's update) against the
  // checker's labels: whether the adapters separate the train steps as they train, without the
  // served kernels' rounding.
  std::vector<double> epoch_auroc;
  std::vector<double> epoch_after;  // FitLoraOptions::after_epoch's value per epoch (if set)
  int64_t n_examples = 0;
  size_t kept_problems = 0;  // train problems whose contexts were kept for the later epochs
};

// The batches of one group's shuffled examples: `order` lists example indices (into problem_of, each
// example's problem); returns each batch's first position in `order` (the last ends at its end). By
// problem, `order` is regrouped (stably) so each problem's examples are one batch; otherwise every
// `batch` consecutive examples are one.
std::vector<size_t> plan_batches(std::vector<size_t>& order, std::span<const size_t> problem_of, int batch,
                                 bool by_problem);

// The options' own checks (rank, alpha, epochs, batch, the average's decay, the kept share), each
// failure one line naming the option: fit_lora_adapters runs them, and fit-prm before it samples.
Status check_fit_lora_options(const FitLoraOptions& opt);

// Trains `adapters` (LoraAdapters::create's, or resumed) on set.steps against targets (one per step,
// in [0, 1]; empty: the checker's labels). progress (may be empty) hears one line per epoch.
Result<LoraFitFigures> fit_lora_adapters(const LoadedModel& lm, const StepSet& set, std::span<const double> targets,
                                         const VerifyHead& head, LoraAdapters& adapters, const FitLoraOptions& opt,
                                         ThreadPool& pool,
                                         const std::function<void(const std::string&)>& progress = {});

}  // namespace agentkv::prm
