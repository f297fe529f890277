// Best-of-N over whole solutions: the policy samples N solutions per problem and one is chosen by a
// scorer. Scorers: the KV-PRM (reads the candidates' caches), the text PRM (re-encodes each prefix,
// the O(L^2) baseline; same head, so the same choices), the policy's mean token log-probability,
// majority vote over final answers, and majority vote weighted by the KV-PRM (each answer weighs the
// summed P(correct) of the candidates stating it: weighted self-consistency).
#pragma once

#include <span>
#include <string>
#include <vector>

#include "lab/prm/step_dataset.h"

namespace agentkv::prm {

enum class BestOfNScorer { kKvPrm, kTextPrm, kLogprob, kVote, kKvPrmVote };

Result<BestOfNScorer> parse_best_of_n_scorer(const std::string& name);

// Where the PRM scorers read a solution: kWeakestStep, min over its "Step" lines of the head's score
// (a process verifier; a solution with no step scores lowest); kWholeSolution, one verify token after
// the complete solution, answer line included (the form fit-prm --solutions trains).
enum class PrmScoreAt { kWeakestStep, kWholeSolution };

Result<PrmScoreAt> parse_prm_score_at(const std::string& name);

struct BestOfNResult {
  int64_t n_problems = 0;
  int64_t n_correct = 0;          // chosen candidate's final answer is right
  int64_t n_oracle = 0;           // some candidate's final answer is right (the ceiling)
  double seconds_scoring = 0;     // choosing, sampling excluded
  std::vector<size_t> chosen;     // per problem
  std::vector<bool> correct;      // per problem: the chosen candidate's answer is right
  // The chosen candidates' steps as the checker sees them: every "Step" line right (and at least one),
  // or no step line at all. A PRM scores steps only, so it can choose right steps with a wrong answer.
  int64_t n_chosen_steps_right = 0, n_chosen_no_step = 0;
};

// kKvPrmVote's candidate scores from the PRM's (log-odds; -inf: not scored): each final answer weighs
// the summed sigmoid(score) of the candidates stating it, and a candidate scores its answer's weight
// (-inf without a final answer).
std::vector<double> weighted_vote(std::span<const Candidate> cands, std::span<const double> prm_scores);

// PRM scorers rank a solution as `at` says. Ties keep the earlier candidate.
Result<BestOfNResult> best_of_n(const LoadedModel& lm, std::span<const ProblemCandidates> problems,
                                BestOfNScorer scorer, const VerifyHead& head, ThreadPool& pool,
                                PrmScoreAt at = PrmScoreAt::kWeakestStep);

}  // namespace agentkv::prm
