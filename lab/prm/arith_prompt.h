// The prompt that makes SmolLM2-Instruct solve an arith problem one step per line, and the reference
// solution written in that format (the few-shot example and the tests use it).
#pragma once

#include <span>
#include <string>
#include <vector>

#include "lab/prm/arith_problem.h"
#include "tokenizer/chat_template.h"

namespace agentkv::prm {

// "Step 1: 4 * 6 = 24\nStep 2: 12 + 24 = 36\nAnswer: 36\n"
std::string format_solution(const ArithProblem& problem);
// The same format for any steps and answer ("Step k: lhs op rhs = result" lines, then "Answer: n").
std::string format_solution(std::span<const ArithStep> steps, int64_t answer);

// System instructions, one worked example (problem kArithExampleSeed as a user / assistant pair),
// then the problem. A 135M model follows a shown format much more reliably than a described one.
std::vector<ChatMessage> arith_policy_messages(const ArithProblem& problem);

// The chat-templated prompt text, ending with the assistant turn's opening.
Result<std::string> arith_policy_prompt(const Tokenizer& tok, const ArithProblem& problem);

}  // namespace agentkv::prm
