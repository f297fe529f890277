// Internal to src/ops: the quantized-activation buffer and the per-ISA kernel tables matmul.cpp
// dispatches through. Not part of the public API.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "gguf/ggml_types.h"

namespace agentkv {

class ThreadPool;

// The format activations take for a weight type's integer/float dot product (ggml's vec_dot_type).
enum class ActKind {
  kF32,    // F32 weights: x as is
  kF16r,   // F16 weights: x rounded through binary16 (ggml converts x to f16), stored as f32
  kBF16r,  // BF16 weights: x rounded through bfloat16, stored as f32
  kQ8_0,   // Q4_0 / Q5_0 / Q8_0 weights: 32-blocks, d = fp16-rounded scale, isum = sum(q)
  kQ8_1,   // Q4_1 / Q5_1 weights: as Q8_0 plus s = fp16(d * sum(q))
  kQ8_K,   // K-quants: 256-blocks, f32 d, bsums over 16
};

ActKind act_kind_for(GgmlType weight_type);

// One token per row. int8 kinds: qs[cols] (padded to 64 B), then d[nb] f32, then aux[nb] (i32 isum
// for Q8_0, f32 s for Q8_1), then i16 bsums[cols/16] for Q8_K. Float kinds: f32[cols].
// Kernels read fields through these accessors so the layout lives in one place.
class ActBuffer {
 public:
  void reset(ActKind kind, int64_t cols, int64_t n_tokens);
  ActKind kind() const { return kind_; }
  int64_t cols() const { return cols_; }
  int64_t n_tokens() const { return n_tokens_; }
  uint8_t* row(int64_t t) { return base_ + size_t(t) * stride_; }
  const uint8_t* row(int64_t t) const { return base_ + size_t(t) * stride_; }
  const int8_t* qs(int64_t t) const { return reinterpret_cast<const int8_t*>(row(t)); }
  const float* f32(int64_t t) const { return reinterpret_cast<const float*>(row(t)); }
  const float* d(int64_t t) const { return reinterpret_cast<const float*>(row(t) + d_off_); }
  const int32_t* isum(int64_t t) const { return reinterpret_cast<const int32_t*>(row(t) + aux_off_); }
  const float* s(int64_t t) const { return reinterpret_cast<const float*>(row(t) + aux_off_); }
  const int16_t* bsums(int64_t t) const { return reinterpret_cast<const int16_t*>(row(t) + bsum_off_); }
  size_t d_off() const { return d_off_; }
  size_t aux_off() const { return aux_off_; }
  size_t bsum_off() const { return bsum_off_; }

 private:
  ActKind kind_ = ActKind::kF32;
  int64_t cols_ = 0, n_tokens_ = 0;
  size_t stride_ = 0, d_off_ = 0, aux_off_ = 0, bsum_off_ = 0;
  std::vector<uint8_t> storage_;
  uint8_t* base_ = nullptr;
};

// Quantizes one token row x[0..cols) into row t of `a` (already reset).
void quantize_act_row(const float* x, ActBuffer& a, int64_t t);

// Six-bit packed (scale, min) pair j of a Q4_K / Q5_K super-block (models.md §3 get_scale_min_k4).
inline void k_scale_min(int j, const uint8_t* q, int* sc, int* m) {
  if (j < 4) {
    *sc = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *sc = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
    *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}

// Which kernels a call uses for its tokens. kAuto picks by the number of tokens (packed panels for
// chunks of >= 4, register tiles below); kTiles and kPanels force one family, so that a token's
// result does not depend on how many tokens share the call. Each family gives every token the same
// float summation order whatever the chunk shape; the two families differ from each other.
enum class KernelPath { kAuto, kTiles, kPanels };

// Computes y[(t - t0) * ldy + r] = dot(weight row r, activation row t) for r in [0, nrows),
// t in [t0, t1). w points at row 0; rows are row_bytes apart.
using MatmulKernel = void (*)(const uint8_t* w, size_t row_bytes, int64_t nrows, const ActBuffer& a,
                              int64_t t0, int64_t t1, float* y, int64_t ldy, KernelPath path);

// nullptr when the ISA has no kernel of its own for the type (the caller falls back a level).
MatmulKernel scalar_kernel(GgmlType t);
MatmulKernel avx2_kernel(GgmlType t);
MatmulKernel avx512_kernel(GgmlType t);
MatmulKernel avx512vnni_kernel(GgmlType t);

}  // namespace agentkv
