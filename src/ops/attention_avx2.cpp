// AVX2 + F16C attention over the f16 paged cache: K/V rows are loaded once per slot and used by all
// query heads of the GQA group.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "ops/attention_kernels.h"
#include "ops/fp16.h"

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

// exp(x) for x <= 0 (softmax after subtracting the max): Cody-Waite range reduction x = n ln2 + r and
// the Cephes degree-5 polynomial; relative error ~2e-7, far below the f16 rounding the weights get.
inline __m256 exp_nonpositive(__m256 x) {
  x = _mm256_max_ps(x, _mm256_set1_ps(-87.0f));
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 p = _mm256_set1_ps(1.9875691500e-4f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
  const __m256 y = _mm256_add_ps(_mm256_fmadd_ps(_mm256_mul_ps(p, r), r, r), _mm256_set1_ps(1.0f));
  const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_mul_ps(y, _mm256_castsi256_ps(e));
}

inline float hmax(__m256 v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_shuffle_ps(m, m, 1));
  return _mm_cvtss_f32(m);
}

// Softmax of each row, weights rounded to f16 (see softmax_rows_f16_weights).
void softmax_rows_f16_weights_avx2(float* scratch, int n_q, int64_t n) {
  for (int h = 0; h < n_q; ++h) {
    float* s = scratch + int64_t(h) * n;
    int64_t j = 0;
    __m256 vmax = _mm256_set1_ps(-INFINITY);
    for (; j + 8 <= n; j += 8) vmax = _mm256_max_ps(vmax, _mm256_loadu_ps(s + j));
    float mx = hmax(vmax);
    for (; j < n; ++j) mx = s[j] > mx ? s[j] : mx;
    const __m256 m = _mm256_set1_ps(mx);
    __m256 vsum = _mm256_setzero_ps();
    for (j = 0; j + 8 <= n; j += 8) {
      const __m256 e = exp_nonpositive(_mm256_sub_ps(_mm256_loadu_ps(s + j), m));
      _mm256_storeu_ps(s + j, e);
      vsum = _mm256_add_ps(vsum, e);
    }
    float sum = hsum(vsum);
    for (; j < n; ++j) sum += (s[j] = std::exp(s[j] - mx));
    const float inv_sum = 1.0f / sum;
    const __m256 inv = _mm256_set1_ps(inv_sum);
    for (j = 0; j + 8 <= n; j += 8)
      _mm256_storeu_ps(s + j, _mm256_cvtph_ps(_mm256_cvtps_ph(_mm256_mul_ps(_mm256_loadu_ps(s + j), inv),
                                                              _MM_FROUND_TO_NEAREST_INT)));
    for (; j < n; ++j) s[j] = round_through_fp16(s[j] * inv_sum);
  }
}

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

namespace {

constexpr int kMaxGroup = 8;

// One cached K row against the n_q rounded queries qs ([n_q][head_dim]): scores j of each head.
inline void score_row(const float* qs, const kv_t* k, int n_q, int head_dim, float scale, float* scratch, int64_t n,
                      int64_t j) {
  __m256 acc[kMaxGroup];
  for (int h = 0; h < n_q; ++h) acc[h] = _mm256_setzero_ps();
  for (int d = 0; d < head_dim; d += 8) {
    const __m256 kk = load_f16(k + d);
    for (int h = 0; h < n_q; ++h) acc[h] = _mm256_fmadd_ps(kk, _mm256_load_ps(qs + h * head_dim + d), acc[h]);
  }
  for (int h = 0; h < n_q; ++h) scratch[h * n + j] = hsum(acc[h]) * scale;
}

// out[h] += weight j of head h * the cached V row.
inline void add_v_row(const kv_t* v, const float* scratch, int n_q, int head_dim, int64_t n, int64_t j, float* out) {
  for (int d = 0; d < head_dim; d += 8) {
    const __m256 vv = load_f16(v + d);
    for (int h = 0; h < n_q; ++h) {
      float* o = out + h * head_dim + d;
      _mm256_storeu_ps(o, _mm256_fmadd_ps(_mm256_set1_ps(scratch[h * n + j]), vv, _mm256_loadu_ps(o)));
    }
  }
}

inline void round_q(const float* src, float* dst, int n) {
  for (int i = 0; i < n; i += 8)
    _mm256_store_ps(dst + i, _mm256_cvtph_ps(_mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT)));
}

// attend_spans for n_q <= kMaxGroup. Plain spans (plain_spans: attend_group's case) walk their block
// tables directly; going through for_each_span_row's per-row callback made Gemma 3's head_dim-256
// decode attention a third slower.
void attend_spans_group(float softcap, const float* q, int n_q, const PagedKvLayer& kv,
                        std::span<const AttentionSpan> spans, int kv_head, int head_dim, float scale, float* out,
                        float* scratch) {
  const int64_t n = span_rows(spans);
  const int64_t head_off = int64_t(kv_head) * head_dim;
  const int bs = kv.block_size;
  // q rounded to f16 (as ggml converts it to the cache type), kept as f32 for the FMAs.
  alignas(32) float qh[kMaxGroup * 1024];
  round_q(q, qh, n_q * head_dim);
  const bool plain = plain_spans(spans);
  if (plain) {
    int64_t j = 0;
    for (const AttentionSpan& sp : spans)
      for (int64_t slot = sp.lo; slot < sp.lo + sp.n; ++slot, ++j)
        score_row(qh, kv.k(sp.table[slot / bs], int(slot % bs)) + head_off, n_q, head_dim, scale, scratch, n, j);
  } else {
    // A master span's query is rotated back by its delta (qr, for the span `rotated_for`).
    alignas(32) float qr[kMaxGroup * 1024];
    size_t rotated_for = spans.size();
    for_each_span_row<false>(kv, spans, head_off, [&](int64_t j, size_t s, const kv_t* k, bool master) {
      const float* qs = qh;
      if (master && spans[s].rope_delta != 0) {
        if (rotated_for != s) {
          std::copy(q, q + n_q * head_dim, qr);
          spans[s].rope->shift(qr, n_q, -spans[s].rope_delta);
          round_q(qr, qr, n_q * head_dim);
          rotated_for = s;
        }
        qs = qr;
      }
      score_row(qs, k, n_q, head_dim, scale, scratch, n, j);
    });
  }
  if (softcap > 0.0f) apply_softcap(scratch, int64_t(n_q) * n, softcap);
  softmax_rows_f16_weights_avx2(scratch, n_q, n);
  std::fill(out, out + int64_t(n_q) * head_dim, 0.0f);
  if (plain) {
    int64_t j = 0;
    for (const AttentionSpan& sp : spans)
      for (int64_t slot = sp.lo; slot < sp.lo + sp.n; ++slot, ++j)
        add_v_row(kv.v(sp.table[slot / bs], int(slot % bs)) + head_off, scratch, n_q, head_dim, n, j, out);
  } else {
    for_each_span_row<true>(kv, spans, head_off, [&](int64_t j, size_t, const kv_t* v, bool) {
      add_v_row(v, scratch, n_q, head_dim, n, j, out);
    });
  }
}

}  // namespace

void attend_spans_avx2(float softcap, const float* q, int n_q, const PagedKvLayer& kv,
                       std::span<const AttentionSpan> spans, int kv_head, int head_dim, float scale, float* out,
                       float* scratch) {
  if (n_q > kMaxGroup) {  // very wide groups: split
    attend_spans_avx2(softcap, q, kMaxGroup, kv, spans, kv_head, head_dim, scale, out, scratch);
    attend_spans_avx2(softcap, q + kMaxGroup * head_dim, n_q - kMaxGroup, kv, spans, kv_head, head_dim, scale,
                      out + kMaxGroup * head_dim, scratch);
    return;
  }
  attend_spans_group(softcap, q, n_q, kv, spans, kv_head, head_dim, scale, out, scratch);
}

void attend_group_avx2(float softcap, const float* q, int n_q, const PagedKvLayer& kv, const int32_t* table, int64_t lo,
                       int64_t hi, int kv_head, int head_dim, float scale, float* out, float* scratch) {
  const AttentionSpan all{table, lo, hi - lo + 1};
  attend_spans_avx2(softcap, q, n_q, kv, std::span<const AttentionSpan>(&all, 1), kv_head, head_dim, scale, out,
                    scratch);
}

}  // namespace agentkv::attention_impl
