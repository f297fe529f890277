// Labelled steps for fitting and evaluating the verify head: the policy samples several solutions
// per problem through the serving engine, the checker labels each step, and the KV-PRM scores every
// step of every candidate of a problem in one batched forward (the multi-agent form: many
// candidates' contexts, one pass over their verify tokens).
#pragma once

#include <span>
#include <string>
#include <vector>

#include "model/loaded_model.h"
#include "lab/prm/arith_problem.h"
#include "lab/prm/step_checker.h"
#include "prm/verify_head.h"
#include "util/thread_pool.h"

namespace agentkv::prm {

struct Candidate {
  std::vector<int32_t> tokens;              // generated, end-of-generation token removed
  std::vector<std::vector<int32_t>> lines;  // tokens cut after each newline
  std::vector<std::string> line_text;
  double logprob = 0;                       // sum of the sampled tokens' log-probabilities
  SolutionCheck check;                      // check.step_line indexes lines
};

struct ProblemCandidates {
  ArithProblem problem;
  std::vector<int32_t> prompt;  // the chat-templated policy prompt's tokens
  std::vector<Candidate> candidates;
};

struct SampleOptions {
  int n_samples = 4;
  float temperature = 0.8f;
  int max_tokens = 96;
  uint64_t seed = 1;
  int64_t kv_mem_bytes = int64_t(1) << 30;
};

// All problems go to one engine at once so decode steps batch across problems. temperature 0 with
// n_samples 1 is the greedy solution.
Result<std::vector<ProblemCandidates>> sample_candidates(const LoadedModel& lm, std::span<const ArithProblem> problems,
                                                         const SampleOptions& opt, ThreadPool& pool);

struct ScoredStep {
  size_t problem = 0, candidate = 0, step = 0;
  float logodds = 0;
  double score = 0;  // the head's score
  int label = 0;  // the checker's verdict on the step
};

// KV-PRM log-odds of every checked step, one forward per problem; the contexts are the prompt (one
// prefill per problem, forked per candidate) and each candidate's lines.
Result<std::vector<ScoredStep>> kv_score_steps(const LoadedModel& lm, std::span<const ProblemCandidates> problems,
                                               const VerifyHead& head, ThreadPool& pool,
                                               int64_t kv_mem_bytes = int64_t(1) << 30);

}  // namespace agentkv::prm
