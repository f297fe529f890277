// ggml block formats: reference dequantization and the quantizers agentkv needs (activations in the
// formats the integer dot products consume, plus Q8_0 for tests). Layouts: shared/reference/models.md §3.
#pragma once

#include <cstddef>
#include <cstdint>

#include "gguf/ggml_types.h"

namespace agentkv {

// True for the weight types matmul / dequantize_row handle:
// F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K, Q6_K.
bool is_matmul_type(GgmlType t);

// Bytes of one row of n elements (n must be a multiple of the type's block size).
size_t type_row_bytes(GgmlType t, int64_t n);

// Scalar reference: dst[0..n) = the values encoded in src (n multiple of the block size).
// Aborts (AGENTKV_CHECK) on types outside is_matmul_type().
void dequantize_row(GgmlType t, const void* src, float* dst, int64_t n);

// Activation quantizers writing ggml's byte layouts (n multiple of 32, or 256 for Q8_K). They round
// like ggml's x86 code (d = amax/127, q = round-half-even(x * 127/amax)) and give exactly the
// values matmul uses internally.
void quantize_row_q8_0(const float* x, void* dst, int64_t n);  // 34 B / 32: half d, i8 qs[32]
void quantize_row_q8_1(const float* x, void* dst, int64_t n);  // 36 B / 32: half d, half s=d*sum(q), qs
void quantize_row_q8_K(const float* x, void* dst, int64_t n);  // 292 B / 256: f32 d, qs[256], i16 bsums[16]

}  // namespace agentkv
