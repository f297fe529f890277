// Per-request sampling: greedy, temperature, top-k, top-p, min-p, repetition penalty, seeded RNG.
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <string>
#include <vector>

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

  // Names the first out-of-range field, for request validation.
  Status validate() const;
};

class Sampler {
 public:
  explicit Sampler(const SamplingParams& p);
  // Picks the next token from logits[n_vocab]; `history` is the sequence so far (for the penalty).
  // logits is modified in place (penalties, temperature).
  int32_t sample(float* logits, int32_t n_vocab, std::span<const int32_t> history);

 private:
  SamplingParams p_;
  std::mt19937_64 rng_;
  std::vector<std::pair<float, int32_t>> cand_;
};

}  // namespace agentkv
