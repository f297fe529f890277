// Weight x activation products for every linear layer. Activations are quantized once per call to the
// weight type's dot-product format (as ggml does, so logits track llama.cpp), then integer block dots
// run through the best kernel the CPU supports (ops/cpu_features.h).
#pragma once

#include <cstddef>
#include <cstdint>

#include "gguf/ggml_types.h"
#include "util/thread_pool.h"

namespace agentkv {

// A row-major weight matrix in its GGUF encoding: `rows` rows of `cols` elements, row r starting at
// data + r * row_bytes. cols must be a multiple of the type's block size. No alignment required.
struct WeightView {
  GgmlType type;
  int64_t cols;
  int64_t rows;
  const void* data;
  size_t row_bytes;
};

// y[t*rows + r] = sum_c W[r][c] * x[t*cols + c] for t in [0, n_tokens), r in [0, rows).
// x and y are f32, one row per token. Supported types: is_matmul_type() in ops/quant.h.
//
// n_tile_tokens < 0 (default): kernels are picked by the token count, fastest for one sequence.
// n_tile_tokens >= 0: batch-invariant mode for the serving engine. Tokens [0, n_tile_tokens) always
// run through the register-tile kernels (the single-token decode kernels) and the rest through the
// packed-panel kernels (the prefill kernels), however many tokens the call holds, so a token's
// result never depends on the other tokens in the batch.
void matmul(const WeightView& w, const float* x, int64_t n_tokens, float* y, ThreadPool& pool,
            int64_t n_tile_tokens = -1);

// Only rows [r0, r1): y[t*(r1-r0) + (r-r0)] (compact, e.g. a slice of the LM head).
void matmul_rows(const WeightView& w, const float* x, int64_t n_tokens, int64_t r0, int64_t r1, float* y,
                 ThreadPool& pool, int64_t n_tile_tokens = -1);

}  // namespace agentkv
