#include "ops/rope.h"

#include <cmath>
#include <utility>

#include "util/status.h"

namespace agentkv {

Rope::Rope(int head_dim, int n_rot, float freq_base, RopeStyle style, std::vector<float> freq_factors,
           float freq_scale, float attn_factor)
    : head_dim_(head_dim),
      n_rot_(n_rot),
      style_(style),
      inv_freq_(n_rot / 2),
      freq_factors_(std::move(freq_factors)),
      freq_scale_(freq_scale),
      attn_factor_(attn_factor) {
  AGENTKV_CHECK(n_rot > 0 && n_rot % 2 == 0 && n_rot <= 1024 && n_rot <= head_dim);
  AGENTKV_CHECK(freq_factors_.empty() || int(freq_factors_.size()) == n_rot / 2);
  AGENTKV_CHECK(attn_factor > 0 && std::isfinite(attn_factor));
  // ggml computes theta by repeated multiplication with theta_scale = base^(-2/n_rot); we do the
  // same so our angles round like llama.cpp's.
  const float theta_scale = std::pow(freq_base, -2.0f / float(n_rot));
  float t = 1.0f;
  for (int i = 0; i < n_rot / 2; ++i) {
    inv_freq_[i] = t;
    t *= theta_scale;
  }
}

void Rope::angles(int64_t pos, float scale, float* cs, float* sn) const {
  for (int i = 0; i < n_rot_ / 2; ++i) {
    // ggml's order: the angle, divided by the pair's frequency factor, times the linear scale.
    float theta = float(pos) * inv_freq_[i];
    if (!freq_factors_.empty()) theta /= freq_factors_[size_t(i)];
    theta *= freq_scale_;
    // ggml scales cos and sin themselves (its mscale); a scale of 1 leaves them exact.
    cs[i] = std::cos(theta) * scale;
    sn[i] = std::sin(theta) * scale;
  }
}

void Rope::rotate_by(float* x, int n_heads, const float* cs, const float* sn) const {
  const int half = n_rot_ / 2;
  for (int h = 0; h < n_heads; ++h) {
    float* v = x + int64_t(h) * head_dim_;
    for (int i = 0; i < half; ++i) {
      const int a = style_ == RopeStyle::kNorm ? 2 * i : i;
      const int b = style_ == RopeStyle::kNorm ? 2 * i + 1 : i + half;
      const float x0 = v[a], x1 = v[b];
      v[a] = x0 * cs[i] - x1 * sn[i];
      v[b] = x0 * sn[i] + x1 * cs[i];
    }
  }
}

void Rope::rotate_scaled(float* x, int n_heads, int64_t pos, float scale) const {
  // Per-position cos/sin computed once for all heads.
  float cs[512], sn[512];
  angles(pos, scale, cs, sn);
  rotate_by(x, n_heads, cs, sn);
}

RopeTable::RopeTable(const Rope& rope, Direction direction, int64_t n_positions)
    : rope_(rope), direction_(direction), n_positions_(n_positions), half_(rope.n_rot() / 2) {
  AGENTKV_CHECK(n_positions >= 0);
  cs_.resize(size_t(n_positions * half_));
  sn_.resize(cs_.size());
  // The scale and sign apply / unapply pass rotate_scaled.
  const bool inverse = direction == Direction::kUnapply;
  const float scale = inverse ? 1.0f / rope.attn_factor() : rope.attn_factor();
  for (int64_t p = 0; p < n_positions; ++p)
    rope_.angles(inverse ? -p : p, scale, cs_.data() + p * half_, sn_.data() + p * half_);
}

void RopeTable::rotate(float* x, int n_heads, int64_t pos) const {
  AGENTKV_CHECK(pos >= 0 && pos < n_positions_);
  rope_.rotate_by(x, n_heads, cs_.data() + pos * half_, sn_.data() + pos * half_);
}

}  // namespace agentkv
