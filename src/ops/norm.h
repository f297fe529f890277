// Normalisation and elementwise activations used by the transformer blocks.
#pragma once

#include <cstdint>

namespace agentkv {

// y = x / sqrt(mean(x^2) + eps) * w  (w may be null: no scale). x and y may alias.
// The sum of squares is accumulated in double, as ggml does, so long rows match its rounding.
void rms_norm(const float* x, const float* w, float* y, int64_t n, float eps);

// The gradient of rms_norm: dx += d(rms_norm(x) * w)/dx transposed times dy (w may be null).
void rms_norm_backward(const float* x, const float* w, const float* dy, float* dx, int64_t n, float eps);

// x[i] = silu(gate[i]) * up[i], in place over gate.
void silu_mul(float* gate, const float* up, int64_t n);

// x[i] = gelu_tanh(gate[i]) * up[i], in place over gate; gelu evaluated at f16 precision as ggml does.
void gelu_tanh_mul(float* gate, const float* up, int64_t n);

// y += x
void add_inplace(float* y, const float* x, int64_t n);

// y *= s
void scale_inplace(float* y, float s, int64_t n);

}  // namespace agentkv
