// Per-request sampling: greedy, temperature, top-k, top-p, min-p, repetition penalty, seeded RNG.
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "engine/grammar_matcher.h"
#include "util/status.h"

namespace agentkv {

struct SamplingParams {
  float temperature = 0.0f;       // 0: greedy
  int top_k = 0;                  // 0: off
  float top_p = 1.0f;             // 1: off
  float min_p = 0.0f;             // 0: off
  float repetition_penalty = 1.0f;  // 1: off (llama.cpp style: divide positive logits, multiply negative)
  int repetition_last_n = 64;     // how many previous tokens the penalty looks at
  uint64_t seed = 0;
  // Constrained decoding (structured outputs, tool calls): only tokens the grammar allows are sampled,
  // and the sequence ends when the grammar is complete and cannot go on. Null: unconstrained.
  std::shared_ptr<const Grammar> grammar;

  // Names the first out-of-range field, for request validation.
  Status validate() const;
};

class Sampler {
 public:
  // vocab: the model's token bytes, needed when p.grammar is set.
  explicit Sampler(const SamplingParams& p, std::shared_ptr<const TokenVocabulary> vocab = nullptr);
  // Picks the next token from logits[n_vocab]; `history` is the sequence so far (for the penalty).
  // logits is modified in place (penalties, temperature, the grammar's mask). -1: the grammar allows
  // no token here (the sequence cannot go on).
  int32_t sample(float* logits, int32_t n_vocab, std::span<const int32_t> history);

  // The grammar, where there is one (its state follows every sampled token), and the time spent on
  // it: masks, checks and advancing (the per-token cost of constrained decoding).
  const GrammarMatcher* grammar() const { return grammar_.get(); }
  // The grammar is complete and nothing can follow: the sequence should end.
  bool grammar_done() const { return grammar_ && grammar_->complete() && !grammar_->can_continue(); }
  double grammar_seconds() const { return grammar_seconds_; }

 private:
  // Restricts logits to the grammar's tokens (greedy: checks the best tokens one by one first; a full
  // mask only when several are refused). False when no token is allowed.
  bool constrain(float* logits, int32_t n_vocab);
  // Greedy or the temperature / top-k / min-p / top-p draw, over logits as they are now.
  int32_t pick(float* logits, int32_t n_vocab);

  SamplingParams p_;
  std::unique_ptr<GrammarMatcher> grammar_;
  std::vector<uint8_t> mask_;
  double grammar_seconds_ = 0;
  std::mt19937_64 rng_;
  std::vector<std::pair<float, int32_t>> cand_;
};

}  // namespace agentkv
