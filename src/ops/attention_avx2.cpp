// AVX2 + F16C attention over the f16 paged cache: K/V rows are loaded once per slot and used by all
// query heads of the GQA group.
#include <immintrin.h>

#include <algorithm>

#include "ops/attention_kernels.h"

namespace agentkv::attention_impl {

namespace {

inline float hsum(__m256 v) {
  __m128 lo = _mm256_castps256_ps128(v), hi = _mm256_extractf128_ps(v, 1);
  lo = _mm_add_ps(lo, hi);
  lo = _mm_add_ps(lo, _mm_movehl_ps(lo, lo));
  lo = _mm_add_ss(lo, _mm_shuffle_ps(lo, lo, 1));
  return _mm_cvtss_f32(lo);
}

inline __m256 load_f16(const kv_t* p) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }

}  // namespace

void kv_store_avx2(kv_t* dst, const float* src, int n) {
  int i = 0;
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT));
  if (i < n) kv_store_scalar(dst + i, src + i, n - i);
}

void kv_load_avx2(float* dst, const kv_t* src, int n) {
  int i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(dst + i, load_f16(src + i));
  if (i < n) kv_load_scalar(dst + i, src + i, n - i);
}

void attend_group_avx2(const float* q, int n_q, const PagedKvLayer& kv, const int32_t* table, int64_t lo,
                       int64_t hi, int kv_head, int head_dim, float scale, float* out, float* scratch) {
  constexpr int kMaxGroup = 8;
  if (n_q > kMaxGroup) {  // very wide groups: split
    attend_group_avx2(q, kMaxGroup, kv, table, lo, hi, kv_head, head_dim, scale, out, scratch);
    attend_group_avx2(q + kMaxGroup * head_dim, n_q - kMaxGroup, kv, table, lo, hi, kv_head, head_dim, scale,
                      out + kMaxGroup * head_dim, scratch);
    return;
  }
  const int64_t n = hi - lo + 1;
  const int64_t head_off = int64_t(kv_head) * head_dim;
  // q rounded to f16 (as ggml converts it to the cache type), kept as f32 for the FMAs.
  alignas(32) float qh[kMaxGroup * 1024];
  for (int i = 0; i < n_q * head_dim; i += 8)
    _mm256_store_ps(qh + i, _mm256_cvtph_ps(_mm256_cvtps_ph(_mm256_loadu_ps(q + i), _MM_FROUND_TO_NEAREST_INT)));
  for (int64_t j = 0; j < n; ++j) {
    const int64_t slot = lo + j;
    const kv_t* k = kv.k(table[slot / kv.block_size], int(slot % kv.block_size)) + head_off;
    __m256 acc[kMaxGroup];
    for (int h = 0; h < n_q; ++h) acc[h] = _mm256_setzero_ps();
    for (int d = 0; d < head_dim; d += 8) {
      const __m256 kk = load_f16(k + d);
      for (int h = 0; h < n_q; ++h) acc[h] = _mm256_fmadd_ps(kk, _mm256_load_ps(qh + h * head_dim + d), acc[h]);
    }
    for (int h = 0; h < n_q; ++h) scratch[h * n + j] = hsum(acc[h]) * scale;
  }
  softmax_rows_f16_weights(scratch, n_q, n);
  std::fill(out, out + int64_t(n_q) * head_dim, 0.0f);
  for (int64_t j = 0; j < n; ++j) {
    const int64_t slot = lo + j;
    const kv_t* v = kv.v(table[slot / kv.block_size], int(slot % kv.block_size)) + head_off;
    for (int d = 0; d < head_dim; d += 8) {
      const __m256 vv = load_f16(v + d);
      for (int h = 0; h < n_q; ++h) {
        float* o = out + h * head_dim + d;
        _mm256_storeu_ps(o, _mm256_fmadd_ps(_mm256_set1_ps(scratch[h * n + j]), vv, _mm256_loadu_ps(o)));
      }
    }
  }
}

}  // namespace agentkv::attention_impl
