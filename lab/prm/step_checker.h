// The exact checker of a solution written in the arith prompt's format, one step per line:
//   Step k: <expression> = <number>
// and optionally "Answer: <number>". Each step's expression (integers, + - * / and parentheses;
// "x" and the Unicode signs for times and divide are read as * and /) is evaluated with exact
// integer arithmetic.
//
// A step is labelled correct when all of these hold:
//   parsed       the line has the format and the step number k is the next one;
//   arithmetic   the expression evaluates exactly (no division with remainder) to the stated number;
//   grounded     every number in the expression is a quantity of the problem or the result of an
//                earlier correct step (so one error makes every later step that builds on it wrong);
//   on_track     the result is one of the reference solution's intermediate results.
// on_track is what makes "12 + 7 = 19" wrong when the problem says 7 are given away. Its limit: a
// correct solution that reaches the answer through other intermediate values (e.g. subtracting
// before adding) has those steps marked off track; the problems are chains where that is rare.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "lab/prm/arith_problem.h"

namespace agentkv::prm {

// Which check a wrong step failed first, for reporting how well a verifier tells each kind apart.
enum class StepError { kNone, kFormat, kArithmetic, kUngrounded, kOffTrack };
inline constexpr int kStepErrorKinds = 5;
const char* step_error_name(StepError e);

struct StepCheck {
  std::string line;
  bool parsed = false;
  bool arithmetic = false;
  bool grounded = false;
  bool on_track = false;
  bool correct = false;            // all four
  int64_t stated = 0;              // the number after "="
  std::vector<int64_t> operands;   // the numbers in the expression
  std::string why;                 // the first failed check, empty when correct
  StepError error() const;         // kNone when correct; kFormat until the line parsed
};

struct SolutionCheck {
  std::vector<StepCheck> steps;       // one per "Step" line, in order
  std::vector<size_t> step_line;      // the index of each step's line among the lines checked
  std::optional<int64_t> final_answer;  // "Answer:" line, else the last step's stated result
  bool answer_correct = false;
  bool all_steps_correct = false;
  // The first step the checker rejects; nullptr when every step is right (or there is none).
  const StepCheck* first_wrong_step() const {
    for (const StepCheck& st : steps)
      if (!st.correct) return &st;
    return nullptr;
  }
};

// Does this line (without its newline) look like a step ("Step" then a digit)? Lines that do not are
// neither scored nor labelled.
bool is_step_line(std::string_view line);
// Does this line (without its newline) begin the final answer ("Answer" at its start)?
bool is_answer_line(std::string_view line);

// Checks one step given the numbers available so far (problem quantities plus results of earlier
// correct steps) and the step number it must carry.
StepCheck check_step(std::string_view line, int expected_index, const ArithProblem& problem,
                     const std::vector<int64_t>& available);

// Checks lines in order (each without its newline, or with trailing whitespace that is ignored).
SolutionCheck check_lines(std::span<const std::string> lines, const ArithProblem& problem);
// check_lines over the text's lines.
SolutionCheck check_solution(std::string_view solution, const ArithProblem& problem);

}  // namespace agentkv::prm
