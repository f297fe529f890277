// Portable reference kernels: one weight row against one activation row, block by block, in the
// integer-dot-then-scale form of ggml's generic vec_dot code. SIMD kernels must match these up to
// float summation order.
#include <cstring>

#include "ops/fp16.h"
#include "ops/kernels.h"

namespace agentkv {
namespace {

// Unpacks one 32-element block of a 4/5-bit legacy type to its unsigned codes (0..15 / 0..31).
void codes_q4(const uint8_t* qs, int* q) {
  for (int j = 0; j < 16; ++j) {
    q[j] = qs[j] & 0xF;
    q[j + 16] = qs[j] >> 4;
  }
}

void codes_q5(const uint8_t* qh_bytes, const uint8_t* qs, int* q) {
  uint32_t qh;
  std::memcpy(&qh, qh_bytes, 4);
  codes_q4(qs, q);
  for (int j = 0; j < 32; ++j) q[j] |= int((qh >> j) & 1u) << 4;
}

int dot32(const int* q, const int8_t* y, int offset) {
  int s = 0;
  for (int j = 0; j < 32; ++j) s += (q[j] - offset) * y[j];
  return s;
}

// Legacy 32-element types: sum((code - offset) * y) scaled by dx * dy; the symmetric types subtract
// a code offset (Q4_0: 8, Q5_0: 16), the "_1" types add m * s instead.
template <GgmlType T>
float dot_row_legacy(const uint8_t* w, const ActBuffer& a, int64_t t) {
  constexpr bool kMin = T == GgmlType::Q4_1 || T == GgmlType::Q5_1;
  constexpr int kOffset = T == GgmlType::Q4_0 ? 8 : T == GgmlType::Q5_0 ? 16 : 0;
  const int bytes = ggml_type_info(uint32_t(T))->block_bytes;
  const int qoff = kMin ? 4 : 2;  // first byte after the half fields
  float sum = 0.0f;
  int q[32];
  for (int64_t b = 0; b < a.cols() / 32; ++b) {
    const uint8_t* blk = w + bytes * b;
    if constexpr (T == GgmlType::Q8_0) {
      for (int j = 0; j < 32; ++j) q[j] = int8_t(blk[qoff + j]);
    } else if constexpr (T == GgmlType::Q4_0 || T == GgmlType::Q4_1) {
      codes_q4(blk + qoff, q);
    } else {
      codes_q5(blk + qoff, blk + qoff + 4, q);
    }
    float v = float(dot32(q, a.qs(t) + 32 * b, kOffset)) * (load_fp16(blk) * a.d(t)[b]);
    if constexpr (kMin) v += load_fp16(blk + 2) * a.s(t)[b];
    sum += v;
  }
  return sum;
}

// K-quants against Q8_K: per super-block, sumi = sum_sub scale * dot(codes, y) and the min (Q4_K,
// Q5_K) or the -32 offset (Q6_K) folded in through bsums.
template <GgmlType T>
float dot_row_k(const uint8_t* w, const ActBuffer& a, int64_t t) {
  const int64_t nb = a.cols() / 256;
  const int8_t* y = a.qs(t);
  const int16_t* bsums = a.bsums(t);
  float sum = 0.0f;
  for (int64_t b = 0; b < nb; ++b, y += 256, bsums += 16) {
    const float dy = a.d(t)[b];
    if constexpr (T == GgmlType::Q6_K) {
      const uint8_t* blk = w + 210 * b;
      const uint8_t* ql = blk;
      const uint8_t* qh = blk + 128;
      const auto* sc = reinterpret_cast<const int8_t*>(blk + 192);
      int sumi = 0;
      for (int half = 0; half < 2; ++half) {
        int q[128];
        for (int l = 0; l < 32; ++l) {
          q[l] = (ql[64 * half + l] & 0xF) | (((qh[32 * half + l] >> 0) & 3) << 4);
          q[l + 32] = (ql[64 * half + l + 32] & 0xF) | (((qh[32 * half + l] >> 2) & 3) << 4);
          q[l + 64] = (ql[64 * half + l] >> 4) | (((qh[32 * half + l] >> 4) & 3) << 4);
          q[l + 96] = (ql[64 * half + l + 32] >> 4) | (((qh[32 * half + l] >> 6) & 3) << 4);
        }
        for (int sub = 0; sub < 8; ++sub) {
          int s = 0;
          for (int j = 0; j < 16; ++j) s += (q[16 * sub + j] - 32) * y[128 * half + 16 * sub + j];
          sumi += sc[8 * half + sub] * s;
        }
      }
      sum += load_fp16(blk + 208) * dy * float(sumi);
    } else {
      constexpr bool kFive = T == GgmlType::Q5_K;
      const size_t bytes = kFive ? 176 : 144;
      const uint8_t* blk = w + bytes * b;
      const uint8_t* qh = blk + 16;
      const uint8_t* ql = kFive ? blk + 48 : blk + 16;
      int sumi = 0, summ = 0;
      for (int g = 0; g < 4; ++g, ql += 32) {
        for (int h = 0; h < 2; ++h) {
          int sc, m;
          k_scale_min(2 * g + h, blk + 4, &sc, &m);
          int s = 0;
          for (int l = 0; l < 32; ++l) {
            int q = h ? ql[l] >> 4 : ql[l] & 0xF;
            if (kFive) q |= ((qh[l] >> (2 * g + h)) & 1) << 4;
            s += q * y[64 * g + 32 * h + l];
          }
          sumi += sc * s;
          summ += m * (bsums[4 * g + 2 * h] + bsums[4 * g + 2 * h + 1]);
        }
      }
      sum += load_fp16(blk) * dy * float(sumi) - load_fp16(blk + 2) * dy * float(summ);
    }
  }
  return sum;
}

// Float weights: x was already rounded to the weight's precision when the activations were built.
template <GgmlType T>
float dot_row_float(const uint8_t* w, const ActBuffer& a, int64_t t) {
  const float* x = a.f32(t);
  float sum = 0.0f;
  for (int64_t c = 0; c < a.cols(); ++c) {
    float v;
    if constexpr (T == GgmlType::F32) {
      std::memcpy(&v, w + 4 * c, 4);
    } else {
      uint16_t h;
      std::memcpy(&h, w + 2 * c, 2);
      v = T == GgmlType::F16 ? fp16_to_f32(h) : bf16_to_f32(h);
    }
    sum += v * x[c];
  }
  return sum;
}

template <float (*Dot)(const uint8_t*, const ActBuffer&, int64_t)>
void kernel(const uint8_t* w, size_t row_bytes, int64_t nrows, const ActBuffer& a, int64_t t0, int64_t t1,
            float* y, int64_t ldy, KernelPath) {  // one order for every token: the path is moot
  for (int64_t t = t0; t < t1; ++t)
    for (int64_t r = 0; r < nrows; ++r) y[(t - t0) * ldy + r] = Dot(w + size_t(r) * row_bytes, a, t);
}

}  // namespace

MatmulKernel scalar_kernel(GgmlType t) {
  switch (t) {
    case GgmlType::F32:
      return kernel<dot_row_float<GgmlType::F32>>;
    case GgmlType::F16:
      return kernel<dot_row_float<GgmlType::F16>>;
    case GgmlType::BF16:
      return kernel<dot_row_float<GgmlType::BF16>>;
    case GgmlType::Q4_0:
      return kernel<dot_row_legacy<GgmlType::Q4_0>>;
    case GgmlType::Q4_1:
      return kernel<dot_row_legacy<GgmlType::Q4_1>>;
    case GgmlType::Q5_0:
      return kernel<dot_row_legacy<GgmlType::Q5_0>>;
    case GgmlType::Q5_1:
      return kernel<dot_row_legacy<GgmlType::Q5_1>>;
    case GgmlType::Q8_0:
      return kernel<dot_row_legacy<GgmlType::Q8_0>>;
    case GgmlType::Q4_K:
      return kernel<dot_row_k<GgmlType::Q4_K>>;
    case GgmlType::Q5_K:
      return kernel<dot_row_k<GgmlType::Q5_K>>;
    case GgmlType::Q6_K:
      return kernel<dot_row_k<GgmlType::Q6_K>>;
    default:
      return nullptr;
  }
}

}  // namespace agentkv
