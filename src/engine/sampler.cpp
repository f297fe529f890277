// The sampler (engine/sampler.h): logit adjustments in a fixed order, then the pick.
#include "engine/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <unordered_set>

#include "ops/argmax.h"
#include "util/monotonic_clock.h"

namespace agentkv {

Status SamplingParams::validate() const {
  if (!(temperature >= 0.0f) || temperature > 100.0f) return make_error("temperature must be in [0, 100]");
  if (top_k < 0) return make_error("top_k must be >= 0");
  if (!(top_p > 0.0f && top_p <= 1.0f)) return make_error("top_p must be in (0, 1]");
  if (!(min_p >= 0.0f && min_p <= 1.0f)) return make_error("min_p must be in [0, 1]");
  if (!(repetition_penalty > 0.0f) || repetition_penalty > 100.0f)
    return make_error("repetition_penalty must be in (0, 100]");
  if (repetition_last_n < 0) return make_error("repetition_last_n must be >= 0");
  if (!(presence_penalty >= -2.0f && presence_penalty <= 2.0f)) return make_error("presence_penalty must be in [-2, 2]");
  if (!(frequency_penalty >= -2.0f && frequency_penalty <= 2.0f))
    return make_error("frequency_penalty must be in [-2, 2]");
  for (size_t i = 0; i < logit_bias.size(); ++i) {
    const auto [t, b] = logit_bias[i];
    const std::string at = "logit_bias token id " + std::to_string(t);
    if (t < 0) return make_error(at + " must be >= 0");
    if (i > 0 && t <= logit_bias[i - 1].first) return make_error(at + ": ids must be sorted and not repeated");
    if (!(b >= -100.0f && b <= 100.0f)) return make_error(at + ": the bias must be in [-100, 100]");
  }
  return {};
}

Sampler::Sampler(const SamplingParams& p, std::shared_ptr<const TokenVocabulary> vocab) : p_(p), rng_(p.seed) {
  if (p_.grammar && vocab) grammar_ = std::make_unique<GrammarMatcher>(p_.grammar, std::move(vocab));
}

bool Sampler::constrain(float* logits, int32_t n_vocab, uint32_t max_rest) {
  constexpr float kOff = -std::numeric_limits<float>::infinity();
  if (p_.temperature <= 0.0f) {
    // Greedy picks the best allowed token, so checking the best few first gives the same token as the
    // full mask, usually at the cost of one check. They are found in one pass (ties: the lower id
    // first, as argmax takes it); refused ones are masked so the argmax lands on the allowed one.
    constexpr int kTries = 8;
    std::pair<float, int32_t> top[kTries];
    int n = 0;
    for (int32_t t = 0; t < n_vocab; ++t) {
      const float v = logits[t];
      if (n == kTries && !(v > top[n - 1].first)) continue;
      int k = n < kTries ? n++ : n - 1;
      while (k > 0 && v > top[k - 1].first) {
        top[k] = top[k - 1];
        --k;
      }
      top[k] = {v, t};
    }
    for (int k = 0; k < n; ++k) {
      if (top[k].first == kOff) return false;
      if (grammar_->allows(top[k].second, max_rest)) return true;
      logits[top[k].second] = kOff;
    }
  }
  grammar_->fill_mask(mask_, max_rest);
  bool any = false;
  for (int32_t t = 0; t < n_vocab && t < int32_t(mask_.size()); ++t) {
    if (!mask_[size_t(t)]) logits[t] = kOff;
    else any = any || logits[t] != kOff;
  }
  return any;
}

int32_t Sampler::sample(float* logits, int32_t n_vocab, std::span<const int32_t> history, int64_t tokens_left) {
  // In OpenAI's order: the bias first, then the penalties over the tokens generated so far.
  for (const auto& [t, b] : p_.logit_bias)
    if (t >= 0 && t < n_vocab) logits[t] += b;
  const bool openai_penalties = p_.presence_penalty != 0.0f || p_.frequency_penalty != 0.0f;
  for (const auto& [t, count] : generated_)
    if (t < n_vocab) logits[t] -= p_.frequency_penalty * float(count) + p_.presence_penalty;
  if (p_.repetition_penalty != 1.0f && p_.repetition_last_n > 0) {
    const size_t n = std::min<size_t>(history.size(), size_t(p_.repetition_last_n));
    std::unordered_set<int32_t> seen(history.end() - n, history.end());
    for (int32_t t : seen) {
      if (t < 0 || t >= n_vocab) continue;
      logits[t] = logits[t] > 0 ? logits[t] / p_.repetition_penalty : logits[t] * p_.repetition_penalty;
    }
  }
  if (grammar_ && !grammar_->unconstrained()) {
    const double t0 = monotonic_seconds();
    // The tokens the answer may still need after this one (GrammarMatcher::allows: the shortest
    // answer's bytes, or its closing plan, fit them).
    const uint32_t max_rest =
        uint32_t(std::clamp<int64_t>(tokens_left - 1, 0, int64_t(GrammarMatcher::kNoBudget)));
    const bool any = constrain(logits, n_vocab, max_rest);
    grammar_seconds_ += monotonic_seconds() - t0;
    if (!any) return -1;
  }
  const int32_t tok = pick(logits, n_vocab);
  if (grammar_) {
    const double t0 = monotonic_seconds();
    const bool ok = grammar_->accept(tok);
    grammar_seconds_ += monotonic_seconds() - t0;
    if (!ok) return -1;  // cannot happen: the mask allowed it
  }
  if (openai_penalties) ++generated_[tok];
  return tok;
}

int32_t Sampler::pick(float* logits, int32_t n_vocab) {
  if (p_.temperature <= 0.0f) {
    // Greedy; ties go to the lowest id, as with llama.cpp's argmax.
    return argmax(logits, n_vocab);
  }
  cand_.clear();
  cand_.reserve(n_vocab);
  for (int32_t i = 0; i < n_vocab; ++i) cand_.emplace_back(logits[i], i);
  auto by_logit = [](const auto& a, const auto& b) { return a.first > b.first || (a.first == b.first && a.second < b.second); };
  size_t keep = cand_.size();
  if (p_.top_k > 0 && size_t(p_.top_k) < keep) {
    keep = size_t(p_.top_k);
    std::partial_sort(cand_.begin(), cand_.begin() + keep, cand_.end(), by_logit);
    cand_.resize(keep);
  } else {
    std::sort(cand_.begin(), cand_.end(), by_logit);
  }
  // Softmax at temperature over the survivors (sorted descending).
  const float inv_t = 1.0f / p_.temperature;
  const float mx = cand_[0].first;
  double sum = 0.0;
  for (auto& c : cand_) {
    c.first = std::exp((c.first - mx) * inv_t);
    sum += c.first;
  }
  for (auto& c : cand_) c.first = float(c.first / sum);
  if (p_.min_p > 0.0f) {
    const float floor_p = p_.min_p * cand_[0].first;
    size_t k = 1;
    while (k < cand_.size() && cand_[k].first >= floor_p) ++k;
    cand_.resize(k);
  }
  if (p_.top_p < 1.0f) {
    double cum = 0.0;
    size_t k = 0;
    while (k < cand_.size()) {
      cum += cand_[k].first;
      ++k;
      if (cum >= p_.top_p) break;
    }
    cand_.resize(k);
  }
  double total = 0.0;
  for (auto& c : cand_) total += c.first;
  std::uniform_real_distribution<double> uni(0.0, total);
  double r = uni(rng_);
  for (auto& c : cand_) {
    r -= c.first;
    if (r <= 0.0) return c.second;
  }
  return cand_.back().second;
}

}  // namespace agentkv
