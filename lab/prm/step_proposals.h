// The policy proposing next steps: from each context (a token list ending where a step line would
// start), N one-line continuations sampled through the serving engine, all contexts in one engine
// run so decode steps batch across them. Used for the step-labelled fitting data and for the step
// beam search.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "engine/engine.h"
#include "model/loaded_model.h"
#include "util/thread_pool.h"

namespace agentkv::prm {

struct StepProposal {
  std::vector<int32_t> tokens;  // the line through the token holding its newline; no end token
  std::string text;             // decoded, without the newline
  double logprob = 0;           // sum over the line's sampled tokens
  bool ended = false;           // the policy ended its turn (end-of-generation) in or after this line
};

// What a finishing line starts with: search --offer-answer offers, and fit-prm --offered-answers trains
// on, the policy's line after it.
inline constexpr std::string_view kAnswerPrefix = "Answer:";

struct ProposeOptions {
  int n = 4;
  float temperature = 0.8f;
  int max_tokens = 32;  // per line
  uint64_t seed = 1;
  int64_t kv_mem_bytes = int64_t(1) << 30;
};

// Keeps one engine across calls, so its prefix cache holds the contexts of earlier rounds (a step
// beam's contexts grow by one line per round).
class StepProposer {
 public:
  static Result<std::unique_ptr<StepProposer>> create(const LoadedModel& lm, const ProposeOptions& opt,
                                                      ThreadPool& pool);
  // result[c] holds opt.n proposals for contexts[c]. Sampling is seeded by the call count and the
  // context index, so a run repeats.
  Result<std::vector<std::vector<StepProposal>>> propose(std::span<const std::vector<int32_t>> contexts);
  // result[c] holds opt.n raw continuations of contexts[c] of at most max_tokens tokens (tokens,
  // logprob, ended; text empty), cut at the first newline when one_line; seeded as propose(). A
  // Monte-Carlo rollout runs to the end of the solution (one_line false).
  Result<std::vector<std::vector<StepProposal>>> sample(std::span<const std::vector<int32_t>> contexts,
                                                        int max_tokens, bool one_line);
  // result[c] is the first of this proposer's lines after kAnswerPrefix appended to contexts[c], its tokens
  // and text starting with the prefix: the policy's answer where a solution would end there. Greedy (and
  // so the same line whatever the seed) with a proposer made by create_answerer.
  Result<std::vector<StepProposal>> answer_lines(std::span<const std::vector<int32_t>> contexts);
  int64_t tokens_sampled() const { return tokens_sampled_; }

 private:
  StepProposer(const LoadedModel& lm, const ProposeOptions& opt, std::unique_ptr<Engine> engine)
      : lm_(lm), opt_(opt), engine_(std::move(engine)) {}
  const LoadedModel& lm_;
  ProposeOptions opt_;
  std::unique_ptr<Engine> engine_;
  uint64_t calls_ = 0;
  int64_t tokens_sampled_ = 0;
};

// A proposer of one greedy line per context (sampling's other settings kept): the answerer whose
// answer_lines search --offer-answer offers and fit-prm --offered-answers labels.
Result<std::unique_ptr<StepProposer>> create_answerer(const LoadedModel& lm, const ProposeOptions& sampling,
                                                      ThreadPool& pool);

// One StepProposer, one call.
Result<std::vector<std::vector<StepProposal>>> propose_steps(const LoadedModel& lm,
                                                             std::span<const std::vector<int32_t>> contexts,
                                                             const ProposeOptions& opt, ThreadPool& pool);

}  // namespace agentkv::prm
