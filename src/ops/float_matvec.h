// Weight x vector products in plain float for passes that are differentiated (the verifier's
// training pass): each weight row is dequantized to f32 and summed in double, with no activation
// quantization, so the result is smooth in x and a gradient of it matches finite differences. The
// serving kernels (ops/matmul.h) quantize activations and are not.
//
// The `_many` forms take several vectors at once (a training batch's examples): each weight row is
// dequantized once for all of them. Every output is summed in the same order as with one vector,
// so the results are the same bit for bit whatever the number of vectors or the pool's size.
#pragma once

#include <cstdint>
#include <span>

#include "ops/matmul.h"

namespace agentkv {

// ys[v][r - r0] = sum_c W[r][c] * xs[v][c] for r in [r0, r1), for every vector v.
void matvec_f32_many(const WeightView& w, std::span<const float* const> xs, int64_t r0, int64_t r1,
                     std::span<float* const> ys, ThreadPool& pool);
// y[r] = sum_c W[r][c] * x[c] for r in [r0, r1): y holds r1 - r0 values.
void matvec_f32(const WeightView& w, const float* x, int64_t r0, int64_t r1, float* y, ThreadPool& pool);
inline void matvec_f32(const WeightView& w, const float* x, float* y, ThreadPool& pool) {
  matvec_f32(w, x, 0, w.rows, y, pool);
}

// dxs[v][c] += sum_r W[r][c] * dys[v][r] for every vector v: the transpose, which carries a gradient
// from a projection's output back to its input. The sum runs in a fixed order, whatever the pool's size.
void matvec_transposed_add_f32_many(const WeightView& w, std::span<const float* const> dys, std::span<float* const> dxs,
                                    ThreadPool& pool);
void matvec_transposed_add_f32(const WeightView& w, const float* dy, float* dx, ThreadPool& pool);

}  // namespace agentkv
