#include "lab/prm/solution_examples.h"

#include <optional>
#include <string>

#include "lab/prm/arith_prompt.h"

namespace agentkv::prm {
namespace {

// 1 when the final answer is right; a wrong one's error is its first wrong step's kind (format without
// a step line, off track when every step is right but the answer is not).
void label_by_answer(LabelledStep& s, const SolutionCheck& check, const ArithProblem& problem) {
  s.label = check.answer_correct ? 1 : 0;
  if (s.label) return;
  const StepCheck* wrong = check.first_wrong_step();
  s.error = check.steps.empty() ? StepError::kFormat : wrong ? wrong->error() : StepError::kOffTrack;
  s.why = !check.final_answer ? "no final answer"
                              : "final answer " + std::to_string(*check.final_answer) + ", not " +
                                    std::to_string(problem.answer);
}

// A slip of 1, 2, 3, 5 or 10 either way (away from zero when subtracting would go below it).
int64_t slipped(int64_t v, uint64_t seed) {
  static constexpr int64_t kSlips[] = {1, 2, 3, 5, 10};
  const int64_t d = kSlips[seed % 5];
  return (seed / 5) % 2 == 0 || v < d ? v + d : v - d;
}

// The last step with another operation on the same operands whose exact result differs, if any.
std::optional<ArithStep> swapped_operation(const ArithStep& s) {
  for (char op : {'+', '-', '*'}) {
    if (op == s.op) continue;
    const int64_t r = op == '+' ? s.lhs + s.rhs : op == '-' ? s.lhs - s.rhs : s.lhs * s.rhs;
    if (r >= 0 && r != s.result) return ArithStep{s.lhs, op, s.rhs, r};
  }
  return std::nullopt;
}

}  // namespace

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
  // Every example starts at the prompt (k = 0): no reference line is needed, so none is written into
  // the contexts; the prompt is exactly what the policy sampled from.
  Result<StepSet> set = StepSet{};
  for (size_t p = 0; p < problems.size(); ++p) {
    const ProblemCandidates& pc = problems[p];
    set->problems.push_back(pc.problem);
    set->prompts.push_back(pc.prompt);
    set->ref_lines.emplace_back();
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
      label_by_answer(s, c.check, pc.problem);
      set->steps.push_back(std::move(s));
    }
  }
  return set;
}

Status add_reference_solutions(StepSet& set, const Tokenizer& tok, int n_altered) {
  if (n_altered < 0 || n_altered > 3)
    return make_error("reference solutions: " + std::to_string(n_altered) + " altered copies is outside 0..3");
  // Labelled by the checker, as the policy's solutions are (so an alteration that happens to be right
  // would count as right).
  auto add = [&](size_t p, const std::string& text) {
    LabelledStep s;
    s.problem = p;
    s.proposal.tokens = tok.encode(text, false, false);
    s.proposal.text = text.substr(0, text.size() - 1);
    s.proposal.ended = true;
    std::vector<std::string> lines;
    for (size_t start = 0, nl; (nl = text.find('\n', start)) != std::string::npos; start = nl + 1)
      lines.push_back(text.substr(start, nl - start));
    label_by_answer(s, check_lines(lines, set.problems[p]), set.problems[p]);
    set.steps.push_back(std::move(s));
    ++set.n_proposals;
  };
  for (size_t p = 0; p < set.problems.size(); ++p) {
    const ArithProblem& prob = set.problems[p];
    if (prob.reference.empty()) continue;
    add(p, format_solution(prob));
    std::vector<ArithStep> steps = prob.reference;
    const ArithStep last = steps.back();
    if (n_altered >= 1) {
      steps.back().result = slipped(last.result, prob.seed);
      add(p, format_solution(steps, steps.back().result));
      steps.back() = last;
    }
    if (n_altered >= 2) {
      if (auto swapped = swapped_operation(last)) {
        steps.back() = *swapped;
        add(p, format_solution(steps, swapped->result));
        steps.back() = last;
      }
    }
    if (n_altered >= 3)
      add(p, format_solution(steps, slipped(prob.answer, prob.seed / 7)));
  }
  return {};
}

}  // namespace agentkv::prm
