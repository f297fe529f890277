// Step-labelled data for fitting and evaluating the verifier: for every problem and every step
// position k of its reference solution, the policy proposes N next lines after the reference's first
// k steps (so each proposal is judged on a correct prefix, and right and wrong steps are both
// common), and the exact checker labels each proposed step line. The KV-PRM then scores all
// proposals of a group of problems from their caches in one batched forward.
#pragma once

#include <functional>
#include <span>
#include <string>
#include <vector>

#include "kv/direct_prefill.h"
#include "model/loaded_model.h"
#include "lab/prm/arith_problem.h"
#include "prm/kv_scorer.h"
#include "lab/prm/step_checker.h"
#include "lab/prm/step_proposals.h"

namespace agentkv::prm {

struct LabelledStep {
  size_t problem = 0;  // index into StepSet::problems
  size_t k = 0;        // reference steps before the proposal
  StepProposal proposal;
  int label = 0;       // the checker's verdict on the proposed step
  std::string why;     // the checker's reason when wrong
  StepError error = StepError::kNone;  // which check it failed
};

struct StepSet {
  std::vector<ArithProblem> problems;
  std::vector<std::vector<int32_t>> prompts;                 // per problem, chat-templated
  std::vector<std::vector<std::vector<int32_t>>> ref_lines;  // per problem, the reference's step lines
  std::vector<LabelledStep> steps;                           // proposals that are step lines
  int64_t n_proposals = 0;                                   // including lines that are not steps
  // Answer lines are examples too, labelled by the final answer they state, and proposals come also
  // after the whole reference (k = its step count), where a step line is one too many: the data that
  // teaches a verifier when a solution is done (search --offer-answer).
  bool with_answers = false;
  // Of n_proposals, the answer lines offered after a reference prefix (sample_labelled_steps' offered_answers).
  int64_t n_offered = 0;
};

// A set with the problems' prompts and reference lines and no proposals yet.
Result<StepSet> new_step_set(const LoadedModel& lm, std::span<const ArithProblem> problems);
// The solution's text lines through a proposed step: problem's first k reference step lines, then
// `line` (each without its newline). What the checker reads, and what a rollout continues.
std::vector<std::string> step_prefix_lines(const ArithProblem& problem, size_t k, const std::string& line);

// Labels a proposed line for step k + 1 of set.problems[problem] (after k reference steps) and adds
// it when it is a step line (or, with set.with_answers, an answer line); other lines only count in
// n_proposals. k may equal the reference's step count only with set.with_answers.
void add_proposal(StepSet& set, size_t problem, size_t k, StepProposal proposal);

// Whether an example is a step line proposed before the reference's end: what a step verifier is
// measured on. False for answer lines and for proposals after the whole reference (with_answers only).
bool is_step_before_end(const StepSet& set, const LabelledStep& s);

// An example's part in the step beam's decision to stop (search --offer-answer), where a set has answer
// lines: before the reference's end a right next step must outrank a wrong answer line of the same prefix
// (an intermediate result stated as the answer) for a beam to go on; after the whole reference a right answer
// line must outrank a further step for it to end. kNone: any other example (a wrong step, say).
enum class StopRole { kNone, kRightNextStep, kEarlyAnswer, kRightFinalAnswer, kExtraStep };
StopRole stop_role(const StepSet& set, const LabelledStep& s);

// with_answers: see StepSet::with_answers. offered_answers (with with_answers): also, after each reference
// prefix of at least one step, the line search --offer-answer offers there (StepProposer::answer_lines,
// greedy), labelled by the answer it states: after part of the reference an intermediate result, wrong,
// against the right next steps; after the whole reference mostly right, against the steps one too many.
// The examples that teach the verifier the beam's stop decision; listed after the proposals at that prefix.
Result<StepSet> sample_labelled_steps(const LoadedModel& lm, std::span<const ArithProblem> problems,
                                      const ProposeOptions& opt, ThreadPool& pool, bool with_answers = false,
                                      bool offered_answers = false);

// The proposals of a fit-prm --dump file (tab-separated: split, problem index, k, label, why, line)
// ('#' lines are comments) for the problems of `split` with index < n_problems, relabelled by the checker (the file's label
// and reason columns are for readers). Lines are re-encoded from their text. Answer lines and
// proposals after the whole reference (a --answers dump) are read as with_answers.
// The file must have been made with the same problem shape (fit-prm --ops).
Result<StepSet> read_step_dump(const LoadedModel& lm, const std::string& path, ArithSplit split, int n_problems,
                               const ArithShape& shape = {});

// Writes the policy contexts of set.steps (prompt, the reference lines before the step, the proposed
// line), kStepGroupProblems problems at a time into `kv`, and hands each group's contexts to `visit`
// with the indices into set.steps they belong to (ascending); a group's contexts are released after
// its visit (unless the visitor forks them). context_pass is the RowOutputs of the context passes (its
// layer_end lets a probe-only reader stop early). first_problem (a multiple of kStepGroupProblems)
// skips the groups before it.
constexpr size_t kStepGroupProblems = 8;
using StepGroupVisitor = std::function<Status(std::span<const KvSequence* const>, std::span<const size_t>)>;
Status for_each_step_group(const LoadedModel& lm, KvManager& kv, const StepSet& set, const RowOutputs& context_pass,
                           ThreadPool& pool, const StepGroupVisitor& visit, size_t first_problem = 0);

// The KV-PRM scores of set.steps, in the order of the problems they belong to (set.steps' order
// when it lists them problem by problem, as sampling and read_step_dump do).
Result<PrmScores> kv_score_labelled(const LoadedModel& lm, const StepSet& set, const VerifyHead& head,
                                    ThreadPool& pool, int64_t kv_mem_bytes = int64_t(1) << 30);

}  // namespace agentkv::prm
