#include "lab/prm/solution_examples.h"

#include <algorithm>

namespace agentkv::prm {

std::vector<int32_t> solution_tokens(const Tokenizer& tok, const Candidate& c) {
  std::vector<int32_t> out = c.tokens;
  const bool ends_line = !c.line_text.empty() && c.line_text.back().find('\n') != std::string::npos;
  if (!ends_line) {
    const std::vector<int32_t> nl = tok.encode("\n", false, false);
    out.insert(out.end(), nl.begin(), nl.end());
  }
  return out;
}

Result<StepSet> solution_set(const LoadedModel& lm, std::span<const ProblemCandidates> problems) {
  std::vector<ArithProblem> probs;
  for (const ProblemCandidates& pc : problems) probs.push_back(pc.problem);
  auto set = new_step_set(lm, probs);
  if (!set.ok()) return set;
  for (size_t p = 0; p < problems.size(); ++p) {
    const ProblemCandidates& pc = problems[p];
    set->prompts[p] = pc.prompt;  // exactly what the policy sampled from
    for (const Candidate& c : pc.candidates) {
      ++set->n_proposals;
      LabelledStep s;
      s.problem = p;
      s.k = 0;
      s.proposal.tokens = solution_tokens(*lm.tokenizer, c);
      for (const std::string& l : c.line_text) s.proposal.text += l;
      if (!s.proposal.text.empty() && s.proposal.text.back() == '\n') s.proposal.text.pop_back();
      s.proposal.logprob = c.logprob;
      s.proposal.ended = true;
      s.label = c.check.answer_correct ? 1 : 0;
      if (!s.label) {
        auto wrong = std::find_if(c.check.steps.begin(), c.check.steps.end(),
                                  [](const StepCheck& st) { return !st.correct; });
        s.error = c.check.steps.empty()           ? StepError::kFormat
                  : wrong != c.check.steps.end() ? wrong->error()
                                                 : StepError::kOffTrack;
        s.why = !c.check.final_answer ? "no final answer"
                                      : "final answer " + std::to_string(*c.check.final_answer) + ", not " +
                                            std::to_string(pc.problem.answer);
      }
      set->steps.push_back(std::move(s));
    }
  }
  return set;
}

}  // namespace agentkv::prm
