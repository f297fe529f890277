#include "ops/norm.h"

#include <cmath>
#include <cstdint>
#include <vector>

#include "ops/fp16.h"

namespace agentkv {

void rms_norm(const float* x, const float* w, float* y, int64_t n, float eps) {
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += double(x[i]) * double(x[i]);
  const float scale = 1.0f / std::sqrt(float(sum / double(n)) + eps);
  if (w) {
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] * scale * w[i];
  } else {
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] * scale;
  }
}

void rms_norm_backward(const float* x, const float* w, const float* dy, float* dx, int64_t n, float eps) {
  double sum = 0.0, dot = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += double(x[i]) * double(x[i]);
  const double s = 1.0 / std::sqrt(sum / double(n) + double(eps));
  for (int64_t i = 0; i < n; ++i) dot += double(w ? w[i] : 1.0f) * double(dy[i]) * double(x[i]);
  const double c = s * s * s * dot / double(n);
  for (int64_t i = 0; i < n; ++i) dx[i] += float(s * double(w ? w[i] : 1.0f) * double(dy[i]) - c * double(x[i]));
}

void silu_mul(float* gate, const float* up, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    float g = gate[i];
    gate[i] = g / (1.0f + std::exp(-g)) * up[i];
  }
}

// ggml evaluates GELU through a table indexed by the f16 input holding f16 outputs (GGML_GELU_FP16),
// with |x| >= 10 short-cut; we compute the same values directly: gelu(f16(x)) rounded to f16.
namespace {

// gelu(h) for every binary16 value h, rounded to binary16 and stored as float: one table lookup per
// element replaces tanh, exactly as fast as llama.cpp's own table and with the same values.
const float* gelu_f16_table() {
  static const std::vector<float> table = [] {
    constexpr float kSqrt2OverPi = 0.7978845608028654f;
    constexpr float kCoef = 0.044715f;
    std::vector<float> t(65536);
    for (uint32_t i = 0; i < 65536; ++i) {
      const float h = fp16_to_f32(uint16_t(i));
      // 1 + c*h*h as one fused multiply-add: llama.cpp's -march=native build contracts it so, and the
      // unfused form lands on the other side of an f16 rounding tie for some inputs (h = -1.999 gives
      // a gelu one f16 step away), which gemma3's post-FFN norm then amplifies.
      t[i] = round_through_fp16(0.5f * h * (1.0f + std::tanh(kSqrt2OverPi * h * std::fma(kCoef * h, h, 1.0f))));
    }
    return t;
  }();
  return table.data();
}

}  // namespace

void gelu_tanh_mul(float* gate, const float* up, int64_t n) {
  const float* table = gelu_f16_table();
  for (int64_t i = 0; i < n; ++i) {
    const float g = gate[i];
    float v;
    if (g <= -10.0f) {
      v = 0.0f;
    } else if (g >= 10.0f) {
      v = g;
    } else {
      v = table[f32_to_fp16(g)];
    }
    gate[i] = v * up[i];
  }
}

void add_inplace(float* y, const float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += x[i];
}

void scale_inplace(float* y, float s, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] *= s;
}

}  // namespace agentkv
