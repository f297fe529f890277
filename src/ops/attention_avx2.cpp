// AVX2 + F16C attention over the f16 paged cache: K/V rows are loaded once per slot and used by all
// query heads of the GQA group.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "ops/attention_kernels.h"
#include "ops/fp16.h"
#include "util/status.h"

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

// Eight values of a K or V row: from the f16 cache, or from a tile of rows already converted to f32
// (exactly: f16 -> f32 is lossless, so both give the same floats).
inline __m256 load8(const kv_t* p) { return load_f16(p); }
inline __m256 load8(const float* p) { return _mm256_loadu_ps(p); }

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

constexpr int kMaxGroup = kAvx2MaxGroup;

// One cached K row against the n_q rounded queries qs ([n_q][head_dim]): scores j of each head.
template <class Row>
inline void score_row(const float* qs, const Row* k, int n_q, int head_dim, float scale, float* scratch, int64_t n,
                      int64_t j) {
  __m256 acc[kMaxGroup];
  for (int h = 0; h < n_q; ++h) acc[h] = _mm256_setzero_ps();
  for (int d = 0; d < head_dim; d += 8) {
    const __m256 kk = load8(k + d);
    for (int h = 0; h < n_q; ++h) acc[h] = _mm256_fmadd_ps(kk, _mm256_loadu_ps(qs + h * head_dim + d), acc[h]);
  }
  for (int h = 0; h < n_q; ++h) scratch[h * n + j] = hsum(acc[h]) * scale;
}

inline void round_q(const float* src, float* dst, int n) {
  for (int i = 0; i < n; i += 8)
    _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT)));
}

// Scores of four consecutive K rows against NH rounded queries, kept in registers (4 * NH <= 12
// accumulators): each score is the same chain of FMAs over d and the same reduction as score_row's
// hsum, done for the four rows at once (a transposed reduction pairing the same lanes), so the
// scores are bit-identical to score_row's.
template <int NH, class Row>
inline void score_rows4(const float* qs, const Row* const* k, int head_dim, float scale, float* scratch, int64_t n,
                        int64_t j) {
  __m256 acc[NH][4];
  for (int h = 0; h < NH; ++h)
    for (int r = 0; r < 4; ++r) acc[h][r] = _mm256_setzero_ps();
  for (int d = 0; d < head_dim; d += 8) {
    __m256 kk[4];
    for (int r = 0; r < 4; ++r) {
      kk[r] = load8(k[r] + d);
      // With two heads or fewer, keeps the row in a register: folded into each head's FMA as a memory
      // operand, an f32 tile row would be loaded once per head (load ports, not FMAs, then bound the
      // loop; Gemma 3's 8k prefill +4.6%). With three, 12 sums and 4 rows fill the 16 registers and forcing
      // it spills (SmolLM2 -6%).
      if constexpr (NH <= 2) asm("" : "+x"(kk[r]));
    }
    for (int h = 0; h < NH; ++h) {
      const __m256 qq = _mm256_loadu_ps(qs + h * head_dim + d);
      for (int r = 0; r < 4; ++r) acc[h][r] = _mm256_fmadd_ps(kk[r], qq, acc[h][r]);
    }
  }
  const __m256 sc = _mm256_set1_ps(scale);
  const __m256i order = _mm256_setr_epi32(0, 4, 2, 6, 0, 4, 2, 6);
  for (int h = 0; h < NH; ++h) {
    const __m256* a = acc[h];
    // hsum step 1 (low half + high half) for rows 0,1 and rows 2,3.
    const __m256 s01 = _mm256_add_ps(_mm256_permute2f128_ps(a[0], a[1], 0x20), _mm256_permute2f128_ps(a[0], a[1], 0x31));
    const __m256 s23 = _mm256_add_ps(_mm256_permute2f128_ps(a[2], a[3], 0x20), _mm256_permute2f128_ps(a[2], a[3], 0x31));
    // Step 2, lanes (0 + 2, 1 + 3): row 0 | row 2 in the low 128 bits, row 1 | row 3 in the high.
    const __m256 y = _mm256_add_ps(_mm256_shuffle_ps(s01, s23, _MM_SHUFFLE(1, 0, 1, 0)),
                                   _mm256_shuffle_ps(s01, s23, _MM_SHUFFLE(3, 2, 3, 2)));
    // Step 3, lane 0 + lane 1: rows 0, 2, 1, 3 at lanes 0, 2, 4, 6.
    const __m256 z = _mm256_add_ps(y, _mm256_shuffle_ps(y, y, _MM_SHUFFLE(2, 3, 0, 1)));
    const __m128 rows = _mm256_castps256_ps128(_mm256_permutevar8x32_ps(z, order));
    _mm_storeu_ps(scratch + h * n + j, _mm_mul_ps(rows, _mm256_castps256_ps128(sc)));
  }
}

// Scores of rows j0.. of the given K rows (n_rows of them) for all n_q heads: heads in passes of at
// most three (four rows each), the rows left over one at a time.
template <int NH, class Row>
void score_rows_pass(const float* qs, const Row* const* k, int64_t n_rows, int head_dim, float scale, float* scratch,
                     int64_t n, int64_t j0) {
  int64_t r = 0;
  for (; r + 4 <= n_rows; r += 4) score_rows4<NH>(qs, k + r, head_dim, scale, scratch, n, j0 + r);
  for (; r < n_rows; ++r) score_row(qs, k[r], NH, head_dim, scale, scratch + 0, n, j0 + r);
}

template <class Row>
void score_rows(const float* qs, const Row* const* k, int64_t n_rows, int n_q, int head_dim, float scale,
                float* scratch, int64_t n, int64_t j0) {
  for (int h0 = 0; h0 < n_q;) {
    const int left = n_q - h0, passes = (left + 2) / 3, nh = (left + passes - 1) / passes;
    const float* q = qs + h0 * head_dim;
    float* s = scratch + h0 * n;
    switch (nh) {
      case 1: score_rows_pass<1>(q, k, n_rows, head_dim, scale, s, n, j0); break;
      case 2: score_rows_pass<2>(q, k, n_rows, head_dim, scale, s, n, j0); break;
      default: score_rows_pass<3>(q, k, n_rows, head_dim, scale, s, n, j0); break;
    }
    h0 += nh;
  }
}

// out[h] = sum over rows j of weight j of head h (w[h * w_stride + j]) * V row j, in row order, one FMA
// per row and element (as accumulating row by row into out does, so the sums are the same bits), with
// a slice of 8 * C output columns of every head held in registers across all rows. kAccumulate: the
// sums continue from what out holds (a later tile of rows), else they start from zero.
template <int NQ, int C, bool kAccumulate, class Row>
inline void add_v_slice(const Row* const* v, int64_t n, const float* w, int64_t w_stride, int d, float* out,
                        int head_dim) {
  __m256 acc[NQ][C];
  for (int h = 0; h < NQ; ++h)
    for (int c = 0; c < C; ++c)
      acc[h][c] = kAccumulate ? _mm256_loadu_ps(out + h * head_dim + d + 8 * c) : _mm256_setzero_ps();
  for (int64_t j = 0; j < n; ++j) {
    __m256 vv[C];
    for (int c = 0; c < C; ++c) vv[c] = load8(v[j] + d + 8 * c);
    for (int h = 0; h < NQ; ++h) {
      const __m256 wj = _mm256_broadcast_ss(w + h * w_stride + j);
      for (int c = 0; c < C; ++c) acc[h][c] = _mm256_fmadd_ps(wj, vv[c], acc[h][c]);
    }
  }
  for (int h = 0; h < NQ; ++h)
    for (int c = 0; c < C; ++c) _mm256_storeu_ps(out + h * head_dim + d + 8 * c, acc[h][c]);
}

template <int NQ, bool kAccumulate, class Row>
void add_v_rows_n(const Row* const* v, int64_t n, const float* w, int64_t w_stride, int head_dim, float* out) {
  // A slice of 32 columns is one 64-byte line of each f16 V row; with 12 accumulators NQ = 3 spills one
  // of them, still faster than reading each line in two passes.
  constexpr int C = NQ <= 3 ? 4 : (NQ <= 6 ? 2 : 1);
  int d = 0;
  for (; d + 8 * C <= head_dim; d += 8 * C) add_v_slice<NQ, C, kAccumulate>(v, n, w, w_stride, d, out, head_dim);
  for (; d < head_dim; d += 8) add_v_slice<NQ, 1, kAccumulate>(v, n, w, w_stride, d, out, head_dim);
}

template <bool kAccumulate = false, class Row>
void add_v_rows(const Row* const* v, int64_t n, const float* w, int64_t w_stride, int n_q, int head_dim, float* out) {
  switch (n_q) {
    case 1: return add_v_rows_n<1, kAccumulate>(v, n, w, w_stride, head_dim, out);
    case 2: return add_v_rows_n<2, kAccumulate>(v, n, w, w_stride, head_dim, out);
    case 3: return add_v_rows_n<3, kAccumulate>(v, n, w, w_stride, head_dim, out);
    case 4: return add_v_rows_n<4, kAccumulate>(v, n, w, w_stride, head_dim, out);
    case 5: return add_v_rows_n<5, kAccumulate>(v, n, w, w_stride, head_dim, out);
    case 6: return add_v_rows_n<6, kAccumulate>(v, n, w, w_stride, head_dim, out);
    case 7: return add_v_rows_n<7, kAccumulate>(v, n, w, w_stride, head_dim, out);
    default: return add_v_rows_n<8, kAccumulate>(v, n, w, w_stride, head_dim, out);
  }
}

// The rows of a call's spans: each row's K and V address, and the span whose rotated query it takes
// (-1: the query as is: a plain row, an override row, or a master row of delta 0). Gathered once per
// call (rows of plain spans straight from their block tables).
struct SpanRows {
  std::vector<const kv_t*> k, v;
  std::vector<int32_t> query_of;
};

SpanRows& gather_rows(const PagedKvLayer& kv, std::span<const AttentionSpan> spans, int64_t head_off, int64_t n) {
  thread_local SpanRows r;
  if (r.k.size() < size_t(n)) {
    r.k.resize(size_t(n));
    r.v.resize(size_t(n));
    r.query_of.resize(size_t(n));
  }
  if (plain_spans(spans)) {
    const int bs = kv.block_size;
    int64_t j = 0;
    for (const AttentionSpan& sp : spans)
      for (int64_t slot = sp.lo; slot < sp.lo + sp.n; ++slot, ++j) {
        const kv_t* k = kv.k(sp.table[slot / bs], int(slot % bs)) + head_off;
        r.k[size_t(j)] = k;
        r.v[size_t(j)] = k + kv.v_offset;
      }
    std::fill(r.query_of.begin(), r.query_of.begin() + n, -1);
    return r;
  }
  for_each_span_row<true>(kv, spans, head_off, [&](int64_t j, size_t, const kv_t* v, bool) { r.v[size_t(j)] = v; });
  for_each_span_row<false>(kv, spans, head_off, [&](int64_t j, size_t s, const kv_t* k, bool master) {
    r.k[size_t(j)] = k;
    r.query_of[size_t(j)] = master && spans[s].rope_delta != 0 ? int32_t(s) : -1;
  });
  return r;
}

// One query token's n_q heads: q rounded to f16 (as ggml converts it to the cache type, kept as f32 for
// the FMAs), and the query rotated back by a master span's delta for the span it was last asked for.
struct TokenQuery {
  const float* q = nullptr;
  float* qh = nullptr;  // [n_q * head_dim]
  float* qr = nullptr;  // [n_q * head_dim]
  int32_t rotated_for = -1;

  void start(const float* query, float* rounded, float* rotated, int n) {
    q = query;
    qh = rounded;
    qr = rotated;
    rotated_for = -1;
    round_q(q, qh, n);
  }
  const float* for_span(std::span<const AttentionSpan> spans, int32_t s, int n_q, int head_dim) {
    if (s < 0) return qh;
    if (rotated_for != s) {
      std::copy(q, q + n_q * head_dim, qr);
      spans[size_t(s)].rope->shift(qr, n_q, -spans[size_t(s)].rope_delta);
      round_q(qr, qr, n_q * head_dim);
      rotated_for = s;
    }
    return qr;
  }
};

// Scores of rows [a, b) of the call for one token, into scratch[h * n + j - j_base]: runs of rows that
// take the same query, four rows a step (score_rows: the same bits as one row at a time). k[j - k_base]
// is row j's K.
template <class Row>
void score_runs(TokenQuery& tq, std::span<const AttentionSpan> spans, const int32_t* query_of, const Row* const* k,
                int64_t k_base, int64_t a, int64_t b, int n_q, int head_dim, float scale, float* scratch, int64_t n,
                int64_t j_base) {
  for (int64_t j0 = a; j0 < b;) {
    const int32_t s = query_of[j0];
    int64_t j1 = j0 + 1;
    while (j1 < b && query_of[j1] == s) ++j1;
    score_rows(tq.for_span(spans, s, n_q, head_dim), k + (j0 - k_base), j1 - j0, n_q, head_dim, scale, scratch, n,
               j0 - j_base);
    j0 = j1;
  }
}

// attend_spans for n_q <= kMaxGroup: scores and sums over the gathered rows with register blocking,
// four K rows per step, a slice of every head's output kept in registers across all V rows.
void attend_spans_group(float softcap, const float* q, int n_q, const PagedKvLayer& kv,
                        std::span<const AttentionSpan> spans, int kv_head, int head_dim, float scale, float* out,
                        float* scratch) {
  const int64_t n = span_rows(spans);
  const SpanRows& rows = gather_rows(kv, spans, int64_t(kv_head) * head_dim, n);
  alignas(32) float qh[kMaxGroup * 1024], qr[kMaxGroup * 1024];
  TokenQuery tq;
  tq.start(q, qh, qr, n_q * head_dim);
  score_runs(tq, spans, rows.query_of.data(), rows.k.data(), 0, 0, n, n_q, head_dim, scale, scratch, n, 0);
  if (softcap > 0.0f) apply_softcap(scratch, int64_t(n_q) * n, softcap);
  softmax_rows_f16_weights_avx2(scratch, n_q, n);
  add_v_rows(rows.v.data(), n, scratch, n, n_q, head_dim, out);
}

// Rows per tile of attend_spans_many: 64 rows of K (or V) as f32 take 64 KiB at head_dim 256, so a
// tile stays in L2 while every query token of the call reads it.
constexpr int64_t kTileRows = 64;

// The tile's rows [r0, r1) for the tokens of a call: converted to f32 once when two or more tokens read
// them, else the f16 rows as they are. fn(rows, k_base) gets the row pointers and the first row's index.
template <class Fn>
void with_tile(const kv_t* const* src, int64_t r0, int64_t r1, int readers, int head_dim, float* tile, Fn&& fn) {
  if (readers < 2) return fn(src + r0, r0);
  const float* rows[kTileRows];
  for (int64_t r = r0; r < r1; ++r) {
    float* dst = tile + (r - r0) * head_dim;
    for (int d = 0; d < head_dim; d += 8) _mm256_storeu_ps(dst + d, load_f16(src[r] + d));
    rows[r - r0] = dst;
  }
  fn(static_cast<const float* const*>(rows), r0);
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

void attend_spans_many_avx2(float softcap, std::span<const SpanQuery> queries, int n_q, const PagedKvLayer& kv,
                            std::span<const AttentionSpan> spans, int kv_head, int head_dim, float scale) {
  // The tokens' scores are held until their softmax: at most kMaxScores floats (16 MiB) per thread, so
  // long contexts take the tokens in smaller groups (one token alone may take more).
  constexpr size_t kMaxScores = size_t(1) << 22;
  size_t held = 0, first = 0;
  for (size_t t = 0; t < queries.size(); ++t) {
    const size_t need = size_t(n_q) * size_t(queries[t].n_rows);
    if (t > first && held + need > kMaxScores) {
      attend_spans_many_avx2(softcap, queries.subspan(first, t - first), n_q, kv, spans, kv_head, head_dim, scale);
      first = t;
      held = 0;
    }
    held += need;
  }
  if (first > 0) {
    attend_spans_many_avx2(softcap, queries.subspan(first), n_q, kv, spans, kv_head, head_dim, scale);
    return;
  }
  const int64_t n = span_rows(spans);
  AGENTKV_CHECK(n_q <= kMaxGroup);
  const SpanRows& rows = gather_rows(kv, spans, int64_t(kv_head) * head_dim, n);
  const size_t nt = queries.size(), qn = size_t(n_q) * size_t(head_dim);
  // Per token: its query buffers and its scores ([n_q][its rows], as attend_spans_group lays them out).
  thread_local std::vector<float> qbuf, scores, tile;
  thread_local std::vector<TokenQuery> tq;
  thread_local std::vector<size_t> score_at;
  qbuf.resize(2 * nt * qn);
  tq.resize(nt);
  score_at.resize(nt);
  tile.resize(size_t(kTileRows) * size_t(head_dim));
  size_t total = 0;
  int64_t r_lo = n, r_hi = 0;
  for (size_t t = 0; t < nt; ++t) {
    const SpanQuery& sq = queries[t];
    AGENTKV_CHECK(sq.first_row >= 0 && sq.n_rows >= 1 && sq.first_row + sq.n_rows <= n);
    tq[t].start(sq.q, &qbuf[2 * t * qn], &qbuf[(2 * t + 1) * qn], int(qn));
    score_at[t] = total;
    total += size_t(n_q) * size_t(sq.n_rows);
    r_lo = std::min(r_lo, sq.first_row);
    r_hi = std::max(r_hi, sq.first_row + sq.n_rows);
  }
  scores.resize(total);
  // fn(t, rows, base, a, b) for every token t attending into each tile [r0, r1) of `src`, tile by tile:
  // rows [a, b) of the token, row j at rows[j - base].
  const auto each_tile = [&](const std::vector<const kv_t*>& src, auto&& fn) {
    for (int64_t r0 = r_lo; r0 < r_hi; r0 += kTileRows) {
      const int64_t r1 = std::min(r0 + kTileRows, r_hi);
      int readers = 0;
      for (const SpanQuery& sq : queries) readers += sq.first_row < r1 && sq.first_row + sq.n_rows > r0;
      if (readers == 0) continue;
      with_tile(src.data(), r0, r1, readers, head_dim, tile.data(), [&](auto tile_rows, int64_t base) {
        for (size_t t = 0; t < nt; ++t) {
          const SpanQuery& sq = queries[t];
          const int64_t a = std::max(r0, sq.first_row), b = std::min(r1, sq.first_row + sq.n_rows);
          if (a < b) fn(t, tile_rows, base, a, b);
        }
      });
    }
  };
  // Scores, one tile of K rows at a time.
  each_tile(rows.k, [&](size_t t, auto k, int64_t base, int64_t a, int64_t b) {
    score_runs(tq[t], spans, rows.query_of.data(), k, base, a, b, n_q, head_dim, scale, &scores[score_at[t]],
               queries[t].n_rows, queries[t].first_row);
  });
  for (size_t t = 0; t < nt; ++t) {
    float* sc = &scores[score_at[t]];
    if (softcap > 0.0f) apply_softcap(sc, int64_t(n_q) * queries[t].n_rows, softcap);
    softmax_rows_f16_weights_avx2(sc, n_q, queries[t].n_rows);
    std::fill(queries[t].out, queries[t].out + qn, 0.0f);
  }
  // Outputs, one tile of V rows at a time: each head's sums go on from the tile before, in row order.
  each_tile(rows.v, [&](size_t t, auto v, int64_t base, int64_t a, int64_t b) {
    add_v_rows<true>(v + (a - base), b - a, &scores[score_at[t]] + (a - queries[t].first_row), queries[t].n_rows, n_q,
                     head_dim, queries[t].out);
  });
}

void attend_group_avx2(float softcap, const float* q, int n_q, const PagedKvLayer& kv, const int32_t* table, int64_t lo,
                       int64_t hi, int kv_head, int head_dim, float scale, float* out, float* scratch) {
  const AttentionSpan all{table, lo, hi - lo + 1};
  attend_spans_avx2(softcap, q, n_q, kv, std::span<const AttentionSpan>(&all, 1), kv_head, head_dim, scale, out,
                    scratch);
}

}  // namespace agentkv::attention_impl
