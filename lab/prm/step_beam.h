// Step-level beam search: per problem W beams; each round the policy proposes N next lines per live
// beam, a scorer rates every proposed line, and the W best of (finished beams + new candidates)
// survive. The multi-agent form: every live beam of every problem is a policy agent with its own
// context, and the KV-PRM scores all their candidates from their caches in ONE batched forward per
// round (with offer_answer, each live beam that ends in a step also gets the policy's greedy
// answer line as a finishing candidate). Scorers: the KV-PRM, the text PRM (re-encodes each candidate's whole trajectory; same head,
// so the same choices), and the policy's log-probability. A PRM ranks a beam by its weakest step.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "lab/prm/arith_problem.h"
#include "lab/prm/step_proposals.h"
#include "prm/verify_head.h"

namespace agentkv::prm {

enum class BeamScorer { kKvPrm, kTextPrm, kLogprob };

Result<BeamScorer> parse_beam_scorer(const std::string& name);

struct BeamOptions {
  int width = 2;      // beams kept per problem
  int max_steps = 8;  // rounds; a beam still open after them is judged as it stands
  ProposeOptions sampling;  // sampling.n: proposals per live beam and round
  // PRM scorers: after each step, also offer the policy's greedy answer ("Answer:" and what it writes
  // next) as a candidate that ends the beam, and rate answer lines with the verifier like steps (a
  // finished beam scores its weakest line, answer included), so the verifier, not the policy's habit
  // of writing more steps, decides when a solution is done. Its lines count as policy output.
  bool offer_answer = false;
  int64_t kv_mem_bytes = int64_t(4) << 30;  // the beams' caches (KV-PRM): prompts, kept beams, candidates
};

struct BeamResult {
  int64_t n_problems = 0, n_correct = 0;
  int64_t policy_lines = 0, policy_tokens = 0;  // sampled by the policy
  int64_t scored_candidates = 0;
  double seconds_total = 0, seconds_scoring = 0;
  std::vector<std::vector<std::string>> solutions;  // the chosen beam's lines, per problem
  std::vector<bool> correct;                         // per problem: the chosen beam's answer is right
};

Result<BeamResult> step_beam_search(const LoadedModel& lm, std::span<const ArithProblem> problems, BeamScorer scorer,
                                    const VerifyHead& head, const BeamOptions& opt, ThreadPool& pool);

}  // namespace agentkv::prm
