// Monte-Carlo step values (KV-PRM, arXiv 2607.09153, after Math-Shepherd): a step's value is the
// share of N policy rollouts from the context right after it (prompt, the reference steps before it,
// the proposed step) whose final answer the checker accepts. A soft label: a wrong step the policy
// still recovers from, or a right one it then fumbles, is told apart from the checker's hard 0 / 1.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "lab/prm/step_labels.h"

namespace agentkv::prm {

struct RolloutOptions {
  int n = 4;            // rollouts per step
  int max_tokens = 96;  // per rollout
  float temperature = 0.8f;
  uint64_t seed = 1;
  int64_t kv_mem_bytes = int64_t(1) << 30;
};

// The share of `rollouts` (each the text the policy wrote after prefix_lines) whose solution, read
// as prefix_lines then the rollout's lines, has a correct final answer (check_lines). 0 when empty.
double rollout_step_value(std::span<const std::string> prefix_lines, std::span<const std::string> rollouts,
                          const ArithProblem& problem);

// One value per set.steps entry; all steps' rollouts go to one engine, so decode batches across
// them and the prefix cache shares each problem's prompt and reference lines.
Result<std::vector<double>> rollout_step_values(const LoadedModel& lm, const StepSet& set, const RolloutOptions& opt,
                                                ThreadPool& pool);

}  // namespace agentkv::prm
