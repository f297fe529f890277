// Rotary position embedding. K is cached after RoPE, so moving cached K to another position is
// one more rotation by the position delta (rotations compose exactly up to float rounding).
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
  Rope(int head_dim, int n_rot, float freq_base, RopeStyle style);
  // Rotates n_heads heads of head_dim floats, contiguous, at position pos (pos may be negative,
  // which un-rotates: used to move cached K between positions).
  void apply(float* x, int n_heads, int64_t pos) const;
  int n_rot() const { return n_rot_; }

 private:
  int head_dim_;
  int n_rot_;
  RopeStyle style_;
  std::vector<float> inv_freq_;  // theta_i = pos * inv_freq_[i], i < n_rot/2
};

}  // namespace agentkv
