// What the verifier appends after a step and what it reads back: the verify tokens (a question turn
// of the chat format asking whether the last step is correct), and either the trained probe on the
// last verify token's hidden state (step_probe.h) or, without one, an affine calibration of the
// log-odds of two answer tokens. Shared by the KV-PRM and the text PRM, so "same model, same
// head" holds by construction.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "model/lora_adapters.h"
#include "prm/step_probe.h"
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
  std::optional<StepProbe> probe;  // when set, the step's score is the probe's log-odds
  // The block whose output the scorers return as features (1..n_layer; 0: none). The probe's layer
  // when there is one; fit-prm sets it to collect features before a probe exists.
  int feature_layer = 0;
  // false: the verify pass stops after feature_layer (a probe needs nothing deeper), and logodds
  // are not read (NaN).
  bool read_logits = true;
  // fit-prm's layer sweep: the scorers also return the features after every block.
  bool every_layer = false;
  // The verifier's low-rank adapters (KV-PRM, arXiv 2607.09153): on for the last verify token only,
  // whose logits are read; the earlier verify tokens and the policy's cache stay the base model's.
  // Null: the base model answers.
  std::shared_ptr<const LoraAdapters> adapters;

  // The step's score (a log-odds of being correct) from the last verify token's logits and features.
  double score(float logodds, const float* features) const {
    return probe ? probe->apply(features) : calibration.apply(logodds);
  }
};

// What answers: "lora" (fitted adapters), "probe" (a fitted probe) or "zero-shot" (the base model's
// answer log-odds, calibrated or not).
inline const char* verifier_kind(const VerifyHead& head) {
  return head.adapters ? "lora" : head.probe ? "probe" : "zero-shot";
}

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
