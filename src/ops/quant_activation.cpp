// Activation quantization: one pass per token per matmul, in the rounding ggml's x86 code uses, so
// the integer dot products see the same int8 values llama.cpp does.
#include <cmath>
#include <cstring>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "ops/fp16.h"
#include "ops/kernels.h"
#include "ops/quant.h"
#include "util/status.h"

namespace agentkv {
namespace {

size_t round_up(size_t v, size_t a) { return (v + a - 1) / a * a; }

// Round half to even via the 1.5*2^23 trick (exact for |v| < 2^22), i.e. what _mm256_round_ps /
// ggml's nearest_int do, without a libm call on baseline x86-64.
inline int round_even(float v) {
  const float t = v + 12582912.0f;
  int32_t bits;
  std::memcpy(&bits, &t, 4);
  return (bits & 0x007FFFFF) - 0x00400000;
}

inline float fp16_round(float v) { return fp16_to_f32(f32_to_fp16(v)); }

// Q8_0 / Q8_1 block of 32: returns sum(q); *d_exact is the unrounded amax/127.
// SSE2 (every x86-64 CPU) does 4 elements per instruction with the scalar path's exact operations:
// the max is order-free, each q is the same product rounded by the same 1.5*2^23 trick and truncated
// to int8 the same way (which matters only when 127 / amax overflows), and a NaN is skipped by maxps as
// fmax skips it.
int quantize_block32(const float* x, int8_t* q, float* d_exact) {
#if defined(__SSE2__)
  const __m128 abs_mask = _mm_castsi128_ps(_mm_set1_epi32(0x7FFFFFFF));
  __m128 m = _mm_setzero_ps();
  for (int j = 0; j < 32; j += 4) m = _mm_max_ps(_mm_and_ps(_mm_loadu_ps(x + j), abs_mask), m);
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_shuffle_ps(m, m, 1));
  const float amax = _mm_cvtss_f32(m);
#else
  float amax = 0.0f;
  for (int j = 0; j < 32; ++j) amax = std::fmax(amax, std::fabs(x[j]));
#endif
  *d_exact = amax / 127.0f;
  const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
#if defined(__SSE2__)
  const __m128 vid = _mm_set1_ps(id), magic = _mm_set1_ps(12582912.0f);
  const __m128i mant = _mm_set1_epi32(0x007FFFFF), bias = _mm_set1_epi32(0x00400000);
  __m128i vsum = _mm_setzero_si128();
  for (int j = 0; j < 32; j += 8) {
    __m128i v[2];
    for (int h = 0; h < 2; ++h) {
      const __m128 t = _mm_add_ps(_mm_mul_ps(_mm_loadu_ps(x + j + 4 * h), vid), magic);
      v[h] = _mm_sub_epi32(_mm_and_si128(_mm_castps_si128(t), mant), bias);
      v[h] = _mm_srai_epi32(_mm_slli_epi32(v[h], 24), 24);  // int8_t(...), as the scalar path truncates
      vsum = _mm_add_epi32(vsum, v[h]);
    }
    const __m128i packed = _mm_packs_epi16(_mm_packs_epi32(v[0], v[1]), _mm_setzero_si128());
    _mm_storel_epi64(reinterpret_cast<__m128i*>(q + j), packed);
  }
  vsum = _mm_add_epi32(vsum, _mm_shuffle_epi32(vsum, 0x4E));
  vsum = _mm_add_epi32(vsum, _mm_shuffle_epi32(vsum, 0xB1));
  return _mm_cvtsi128_si32(vsum);
#else
  int sum = 0;
  for (int j = 0; j < 32; ++j) {
    q[j] = int8_t(round_even(x[j] * id));
    sum += q[j];
  }
  return sum;
#endif
}

// Q8_K block of 256 (ggml quantize_row_q8_K_ref): scale from the signed value of largest magnitude,
// so d may be negative; q clamped to 127 on the top side only, as ggml does.
float quantize_block256(const float* x, int8_t* q, int16_t* bsums) {
  float amax = 0.0f, max = 0.0f;
  for (int j = 0; j < 256; ++j) {
    const float ax = std::fabs(x[j]);
    if (ax > amax) {
      amax = ax;
      max = x[j];
    }
  }
  if (amax == 0.0f) {
    std::memset(q, 0, 256);
    std::memset(bsums, 0, 16 * sizeof(int16_t));
    return 0.0f;
  }
  const float iscale = -127.0f / max;
  for (int j = 0; j < 256; ++j) {
    const int v = round_even(iscale * x[j]);
    q[j] = int8_t(v < 127 ? v : 127);
  }
  for (int g = 0; g < 16; ++g) {
    int s = 0;
    for (int j = 0; j < 16; ++j) s += q[16 * g + j];
    bsums[g] = int16_t(s);
  }
  return 1.0f / iscale;
}

}  // namespace

ActKind act_kind_for(GgmlType t) {
  switch (t) {
    case GgmlType::F32:
      return ActKind::kF32;
    case GgmlType::F16:
      return ActKind::kF16r;
    case GgmlType::BF16:
      return ActKind::kBF16r;
    case GgmlType::Q4_0:
    case GgmlType::Q5_0:
    case GgmlType::Q8_0:
      return ActKind::kQ8_0;
    case GgmlType::Q4_1:
    case GgmlType::Q5_1:
      return ActKind::kQ8_1;
    case GgmlType::Q4_K:
    case GgmlType::Q5_K:
    case GgmlType::Q6_K:
      return ActKind::kQ8_K;
    default:
      AGENTKV_CHECK(false);
  }
  return ActKind::kF32;
}

void ActBuffer::reset(ActKind kind, int64_t cols, int64_t n_tokens) {
  kind_ = kind;
  cols_ = cols;
  n_tokens_ = n_tokens;
  const size_t c = size_t(cols);
  if (kind == ActKind::kF32 || kind == ActKind::kF16r || kind == ActKind::kBF16r) {
    stride_ = round_up(c * 4, 64);
    d_off_ = aux_off_ = bsum_off_ = stride_;
  } else {
    const size_t nb = kind == ActKind::kQ8_K ? c / 256 : c / 32;
    d_off_ = round_up(c, 64);
    aux_off_ = d_off_ + nb * 4;
    bsum_off_ = aux_off_ + nb * 4;
    stride_ = round_up(bsum_off_ + (kind == ActKind::kQ8_K ? c / 16 * 2 : 0), 64);
  }
  // 64 B alignment of every row lets kernels use aligned-friendly loads without relying on it.
  const size_t need = stride_ * size_t(n_tokens) + 64;
  if (storage_.size() < need) storage_.resize(need);
  const auto addr = reinterpret_cast<uintptr_t>(storage_.data());
  base_ = storage_.data() + (round_up(addr, 64) - addr);
}

void quantize_act_row(const float* x, ActBuffer& a, int64_t t) {
  uint8_t* row = a.row(t);
  const int64_t n = a.cols();
  switch (a.kind()) {
    case ActKind::kF32:
      std::memcpy(row, x, size_t(n) * 4);
      return;
    case ActKind::kF16r:
    case ActKind::kBF16r: {
      float* out = reinterpret_cast<float*>(row);
      const bool half = a.kind() == ActKind::kF16r;
      for (int64_t i = 0; i < n; ++i) out[i] = half ? fp16_round(x[i]) : bf16_to_f32(f32_to_bf16(x[i]));
      return;
    }
    case ActKind::kQ8_0:
    case ActKind::kQ8_1: {
      auto* q = reinterpret_cast<int8_t*>(row);
      auto* d = reinterpret_cast<float*>(row + a.d_off());
      uint8_t* aux = row + a.aux_off();
      for (int64_t b = 0; b < n / 32; ++b) {
        float d_exact;
        const int sum = quantize_block32(x + 32 * b, q + 32 * b, &d_exact);
        d[b] = fp16_round(d_exact);
        if (a.kind() == ActKind::kQ8_0) {
          std::memcpy(aux + 4 * b, &sum, 4);
        } else {
          const float s = fp16_round(d_exact * float(sum));
          std::memcpy(aux + 4 * b, &s, 4);
        }
      }
      return;
    }
    case ActKind::kQ8_K: {
      auto* q = reinterpret_cast<int8_t*>(row);
      auto* d = reinterpret_cast<float*>(row + a.d_off());
      auto* bs = reinterpret_cast<int16_t*>(row + a.bsum_off());
      for (int64_t b = 0; b < n / 256; ++b) d[b] = quantize_block256(x + 256 * b, q + 256 * b, bs + 16 * b);
      return;
    }
  }
}

void quantize_row_q8_0(const float* x, void* dst, int64_t n) {
  AGENTKV_CHECK(n % 32 == 0);
  auto* out = static_cast<uint8_t*>(dst);
  for (int64_t b = 0; b < n / 32; ++b, out += 34) {
    float d;
    quantize_block32(x + 32 * b, reinterpret_cast<int8_t*>(out + 2), &d);
    const uint16_t h = f32_to_fp16(d);
    std::memcpy(out, &h, 2);
  }
}

void quantize_row_q8_1(const float* x, void* dst, int64_t n) {
  AGENTKV_CHECK(n % 32 == 0);
  auto* out = static_cast<uint8_t*>(dst);
  for (int64_t b = 0; b < n / 32; ++b, out += 36) {
    float d;
    const int sum = quantize_block32(x + 32 * b, reinterpret_cast<int8_t*>(out + 4), &d);
    const uint16_t hd = f32_to_fp16(d), hs = f32_to_fp16(d * float(sum));
    std::memcpy(out, &hd, 2);
    std::memcpy(out + 2, &hs, 2);
  }
}

void quantize_row_q8_K(const float* x, void* dst, int64_t n) {
  AGENTKV_CHECK(n % 256 == 0);
  auto* out = static_cast<uint8_t*>(dst);
  for (int64_t b = 0; b < n / 256; ++b, out += 292) {
    int16_t bsums[16];
    const float d = quantize_block256(x + 256 * b, reinterpret_cast<int8_t*>(out + 4), bsums);
    std::memcpy(out, &d, 4);
    std::memcpy(out + 260, bsums, sizeof bsums);
  }
}

}  // namespace agentkv
