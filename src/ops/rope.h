// Rotary position embedding. K is cached after RoPE, so moving cached K to another position is
// one more rotation by the position delta (rotations compose exactly up to float rounding). An
// attention factor (LongRoPE's, {arch}.rope.scaling.attn_factor) multiplies cos and sin, so Q and K
// leave RoPE scaled by it, as ggml's rope does; moving cached K rotates without scaling again.
#pragma once

#include <cstdint>
#include <vector>

namespace agentkv {

enum class RopeStyle {
  kNorm,  // rotate consecutive pairs (x[2i], x[2i+1]) — GGUF llama (weights permuted by the converter)
  kNeox,  // rotate pairs (x[i], x[i + n_rot/2]) — gemma
};

class Rope {
 public:
  // freq_factors (n_rot/2 values, or empty): each pair's angle is divided by its factor, as llama.cpp
  // applies a GGUF's rope_freqs.weight (Llama 3.x's frequency scaling). freq_scale multiplies every
  // angle (linear RoPE scaling: 1 / rope.scaling.factor). attn_factor multiplies cos and sin.
  Rope(int head_dim, int n_rot, float freq_base, RopeStyle style, std::vector<float> freq_factors = {},
       float freq_scale = 1.0f, float attn_factor = 1.0f);
  // RoPE of n_heads heads of head_dim floats, contiguous, at position pos: rotated and scaled by
  // attn_factor (the forward pass's Q and K).
  void apply(float* x, int n_heads, int64_t pos) const { rotate_scaled(x, n_heads, pos, attn_factor_); }
  // The inverse of apply at pos: un-rotated and divided by attn_factor (K back to the projection's output).
  void unapply(float* x, int n_heads, int64_t pos) const { rotate_scaled(x, n_heads, -pos, 1.0f / attn_factor_); }
  // The transpose of apply at pos (rotated back and scaled by attn_factor): carries a gradient with
  // respect to apply's output to its input.
  void apply_transposed(float* x, int n_heads, int64_t pos) const { rotate_scaled(x, n_heads, -pos, attn_factor_); }
  // Rotation by delta positions only (delta may be negative): moves cached K, already scaled, between positions.
  void shift(float* x, int n_heads, int64_t delta) const { rotate_scaled(x, n_heads, delta, 1.0f); }
  int n_rot() const { return n_rot_; }
  float attn_factor() const { return attn_factor_; }
  // The cos and sin (n_rot/2 each) rotate_scaled rotates by at pos, both multiplied by scale.
  void angles(int64_t pos, float scale, float* cs, float* sn) const;
  // Rotates n_heads heads by angles' output: rotate_scaled with the angles computed elsewhere.
  void rotate_by(float* x, int n_heads, const float* cs, const float* sn) const;
  bool operator==(const Rope&) const = default;

 private:
  int head_dim_;
  int n_rot_;
  RopeStyle style_;
  std::vector<float> inv_freq_;  // theta_i = pos * inv_freq_[i], i < n_rot/2
  std::vector<float> freq_factors_;
  float freq_scale_ = 1.0f;
  float attn_factor_ = 1.0f;

  void rotate_scaled(float* x, int n_heads, int64_t pos, float scale) const;
};

// A Rope's cos and sin at positions [0, n), computed once: the floats apply (or unapply) computes
// at each call, so rotating through the table is bit-identical to them, without a sincos per pair
// per row. What rotates many rows of one layer, or of the layers that share a Rope (a transfer
// map's reads and writes), at positions known ahead.
class RopeTable {
 public:
  enum class Direction { kApply, kUnapply };
  RopeTable(const Rope& rope, Direction direction, int64_t n_positions);
  const Rope& rope() const { return rope_; }
  Direction direction() const { return direction_; }
  int64_t n_positions() const { return n_positions_; }
  // apply (kApply) or unapply (kUnapply) at pos in [0, n_positions).
  void rotate(float* x, int n_heads, int64_t pos) const;

 private:
  Rope rope_;
  Direction direction_;
  int64_t n_positions_;
  int half_;
  std::vector<float> cs_, sn_;  // [pos][half]
};

}  // namespace agentkv
