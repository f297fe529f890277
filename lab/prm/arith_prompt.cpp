#include "lab/prm/arith_prompt.h"

namespace agentkv::prm {

std::string format_solution(std::span<const ArithStep> steps, int64_t answer) {
  std::string out;
  for (size_t i = 0; i < steps.size(); ++i) {
    const ArithStep& s = steps[i];
    out += "Step " + std::to_string(i + 1) + ": " + std::to_string(s.lhs) + " " + s.op + " " +
           std::to_string(s.rhs) + " = " + std::to_string(s.result) + "\n";
  }
  out += "Answer: " + std::to_string(answer) + "\n";
  return out;
}

std::string format_solution(const ArithProblem& problem) { return format_solution(problem.reference, problem.answer); }

std::vector<ChatMessage> arith_policy_messages(const ArithProblem& problem) {
  const ArithProblem example = generate_arith_problem(kArithExampleSeed);
  return {
      {"system",
       "You solve math word problems. Write one step per line as 'Step k: <calculation> = <number>', "
       "using only numbers from the problem or from earlier steps. End with 'Answer: <number>'."},
      {"user", example.text},
      {"assistant", format_solution(example)},
      {"user", problem.text},
  };
}

Result<std::string> arith_policy_prompt(const Tokenizer& tok, const ArithProblem& problem) {
  const std::vector<ChatMessage> messages = arith_policy_messages(problem);
  return apply_chat_template(tok, messages, true);
}

}  // namespace agentkv::prm
