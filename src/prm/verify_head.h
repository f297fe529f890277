// What the verifier appends after a step and what it reads back: the verify tokens (a question turn
// of the chat format asking whether the last step is correct), the two answer tokens, and the fitted
// affine calibration of their log-odds. Shared by the KV-PRM and the text PRM, so "same model, same
// head" holds by construction.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"
#include "util/status.h"

namespace agentkv::prm {

// score = a * x + b on the log-odds x = logit(pos) - logit(neg) = log p(pos) / p(neg); the step's
// probability of being correct is sigmoid(score).
struct Calibration {
  double a = 1.0;
  double b = 0.0;
  double apply(double x) const { return a * x + b; }
};

struct VerifyHead {
  std::string question;           // the user turn's text
  std::vector<int32_t> tokens;    // appended after the step's newline
  int32_t pos_token = -1;         // "+"
  int32_t neg_token = -1;         // "-"
  Calibration calibration;
};

inline constexpr const char* kDefaultVerifyQuestion = "Is the last step correct? Answer + or -.";

// Closes the assistant turn, asks `question` in a user turn and opens the assistant's answer, in
// the tokenizer's chat format (ChatML or Gemma). pos / neg must each encode to one token. The
// calibration is the identity until fitted.
Result<VerifyHead> make_verify_head(const Tokenizer& tok, const std::string& question = kDefaultVerifyQuestion,
                                    const std::string& pos = "+", const std::string& neg = "-");

// Log-odds of the verify answer from one row of logits.
inline float verify_logodds(const VerifyHead& head, const float* logits) {
  return logits[head.pos_token] - logits[head.neg_token];
}

}  // namespace agentkv::prm
