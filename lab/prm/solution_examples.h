// Whole solutions as verifier examples (outcome supervision through the KV-PRM's verify token): each
// candidate the policy sampled becomes one example whose context is the prompt and every line the
// policy wrote, answer line included, labelled right when its final answer is right. The verify token
// then judges the complete solution from its cache, as best-of-N needs (a solution's steps can all
// be wrong by the checker while its answer is right: BENCHMARKS.md, issue 20).
#pragma once

#include <span>
#include <vector>

#include "lab/prm/step_dataset.h"
#include "lab/prm/step_labels.h"

namespace agentkv::prm {

// The candidate's tokens as a verify question expects to follow them: every line, and a newline after
// a last line that lacks one (a solution cut by max_tokens, or ended without a newline).
std::vector<int32_t> solution_tokens(const Tokenizer& tok, const Candidate& c);

// One example per candidate, problem by problem in candidate order (so kv_score_labelled's i-th score
// is the i-th candidate of the flattened list), each at k = 0 with the whole solution as its proposal
// (no reference lines: ref_lines are empty, so no context writes them);
// label 1 when the final answer is right. A wrong one's error is its first wrong step's kind (format
// when it has no step line, off track when every step is right but the answer is not).
Result<StepSet> solution_set(const LoadedModel& lm, std::span<const ProblemCandidates> problems);

// The checker's labels on written solutions, beside the policy's: for each problem of `set`, its
// reference solution (right) and `n_altered` (0..3) altered copies, each wrong one way: the last step's
// result slipped by a few units (and the answer with it), the last step's operation swapped (its own
// arithmetic right, off track), the steps right and the answer line wrong. Deterministic from each
// problem's seed. Added as whole-solution examples (k = 0) after the set's own, labelled by the checker
// from their final answer as the policy's are.
Status add_reference_solutions(StepSet& set, const Tokenizer& tok, int n_altered);

}  // namespace agentkv::prm
