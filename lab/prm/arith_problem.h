// Generated multi-step arithmetic word problems with a known chain of intermediate results, so a
// program can label every step a policy writes (see step_checker.h). Deterministic from a seed;
// train and held-out problems come from disjoint seed ranges.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace agentkv::prm {

// One reference step: lhs op rhs = result, op one of + - * /.
struct ArithStep {
  int64_t lhs = 0;
  char op = '+';
  int64_t rhs = 0;
  int64_t result = 0;
};

struct ArithProblem {
  uint64_t seed = 0;
  std::string text;                 // the word problem, ending with the question
  std::vector<int64_t> quantities;  // every number the text states, in order
  std::vector<ArithStep> reference; // one correct solution, step by step
  int64_t answer = 0;               // reference.back().result
};

enum class ArithSplit { kTrain, kHeldOut };

// Seeds never overlap: train uses [0, 2^32), held-out [2^32, 2^33). The few-shot example of the
// prompt uses a seed above both (arith_prompt.h), so no evaluated problem appears in the prompt.
uint64_t arith_seed(ArithSplit split, uint64_t index);
inline constexpr uint64_t kArithExampleSeed = uint64_t(1) << 40;

// The same seed gives the same problem on every platform (own PRNG, no std distributions, whose
// outputs are implementation-defined). 2 or 3 operations, 2 to 6 reference steps (buying packs takes
// two: a product and a sum); all values stay non-negative integers below 1000.
ArithProblem generate_arith_problem(uint64_t seed);

// How many operations a problem has, drawn uniformly from [min_ops, max_ops] (1..3; 3 keeps every
// value below 1000). The default is the task's 2..3; search --ops 1 gives one-operation problems
// (one or two reference steps), where the small policy solves some and a scorer's choice shows.
struct ArithShape {
  int min_ops = 2;
  int max_ops = 3;
};
ArithProblem generate_arith_problem(uint64_t seed, const ArithShape& shape);

}  // namespace agentkv::prm
