// Per-request sampling: logit bias, OpenAI's presence / frequency penalties, repetition penalty, then
// greedy or temperature with top-k, top-p, min-p and a seeded RNG. Everything off leaves the logits as
// they are, so the greedy token is the argmax of the model's logits.
#pragma once

#include <cstdint>
#include <limits>
#include <random>
#include <span>
#include <string>
#include <unordered_map>
#include <utility>
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
  // OpenAI's penalties, in [-2, 2], 0 off: logit[t] -= frequency_penalty * count(t) + presence_penalty *
  // (count(t) > 0), count(t) being how often this sampler has returned t (the generated tokens, not the prompt).
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  // (token id, bias in [-100, 100]) sorted by id without repeats, added to the logits before anything else.
  // Ids are checked against the vocabulary where it is known (Engine::validate).
  std::vector<std::pair<int32_t, float>> logit_bias;
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
  // Picks the next token from logits[n_vocab]; `history` is the sequence so far (for the repetition
  // penalty). logits is modified in place (bias, penalties, temperature, the grammar's mask). -1: the
  // grammar allows no token here (the sequence cannot go on).
  // tokens_left: how many tokens the sequence may still generate, this one included; under a grammar
  // only tokens after which the answer can still be completed in time are allowed, so a structured
  // answer closes within max_tokens (GrammarMatcher::allows).
  int32_t sample(float* logits, int32_t n_vocab, std::span<const int32_t> history,
                 int64_t tokens_left = std::numeric_limits<int64_t>::max());

  // The grammar, where there is one (its state follows every sampled token), and the time spent on
  // it: masks, checks and advancing (the per-token cost of constrained decoding).
  const GrammarMatcher* grammar() const { return grammar_.get(); }
  // The grammar is complete and nothing can follow: the sequence should end.
  bool grammar_done() const { return grammar_ && grammar_->complete() && !grammar_->can_continue(); }
  double grammar_seconds() const { return grammar_seconds_; }

 private:
  // Restricts logits to the grammar's tokens (greedy: checks the best tokens one by one first; a full
  // mask only when several are refused). False when no token is allowed.
  bool constrain(float* logits, int32_t n_vocab, uint32_t max_rest);
  // The token from the adjusted logits: the argmax, or a draw at temperature (top-k, min-p, top-p).
  int32_t pick(float* logits, int32_t n_vocab);

  SamplingParams p_;
  std::unique_ptr<GrammarMatcher> grammar_;
  std::vector<uint8_t> mask_;
  double grammar_seconds_ = 0;
  std::mt19937_64 rng_;
  std::vector<std::pair<float, int32_t>> cand_;
  std::unordered_map<int32_t, int> generated_;  // how often each token was returned (only with OpenAI penalties)
};

}  // namespace agentkv
