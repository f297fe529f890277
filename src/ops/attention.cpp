#include "ops/attention.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "ops/attention_kernels.h"
#include "ops/cpu_features.h"
#include "ops/fp16.h"

namespace agentkv {

namespace attention_impl {

void softmax_rows_f16_weights(float* scratch, int n_q, int64_t n) {
  for (int h = 0; h < n_q; ++h) {
    float* s = scratch + int64_t(h) * n;
    float mx = -INFINITY;
    for (int64_t j = 0; j < n; ++j) mx = s[j] > mx ? s[j] : mx;
    double sum = 0.0;
    for (int64_t j = 0; j < n; ++j) {
      const float e = std::exp(s[j] - mx);
      s[j] = e;
      sum += e;
    }
    const float inv = float(1.0 / sum);
    for (int64_t j = 0; j < n; ++j) s[j] = round_through_fp16(s[j] * inv);
  }
}

void kv_store_scalar(kv_t* dst, const float* src, int n) {
  for (int i = 0; i < n; ++i) dst[i] = f32_to_fp16(src[i]);
}

void kv_load_scalar(float* dst, const kv_t* src, int n) {
  for (int i = 0; i < n; ++i) dst[i] = fp16_to_f32(src[i]);
}

void attend_spans_scalar(float softcap, const float* q, int n_q, const PagedKvLayer& kv,
                         std::span<const AttentionSpan> spans, int kv_head, int head_dim, float scale, float* out,
                         float* scratch) {
  const int64_t n = span_rows(spans);
  const int64_t head_off = int64_t(kv_head) * head_dim;
  float qh[1024];
  float row[1024];
  for (int h = 0; h < n_q; ++h) {
    for (int d = 0; d < head_dim; ++d) qh[d] = round_through_fp16(q[h * head_dim + d]);
    float qr[1024];  // a master span's query, rotated back by its delta (for the span `rotated_for`)
    size_t rotated_for = spans.size();
    for_each_span_row<false>(kv, spans, head_off, [&](int64_t j, size_t s, const kv_t* k, bool master) {
      const float* qs = qh;
      if (master && spans[s].rope_delta != 0) {
        if (rotated_for != s) {
          std::copy(q + h * head_dim, q + (h + 1) * head_dim, qr);
          spans[s].rope->shift(qr, 1, -spans[s].rope_delta);
          for (int d = 0; d < head_dim; ++d) qr[d] = round_through_fp16(qr[d]);
          rotated_for = s;
        }
        qs = qr;
      }
      kv_load_scalar(row, k, head_dim);
      float sc = 0.0f;
      for (int d = 0; d < head_dim; ++d) sc += qs[d] * row[d];
      scratch[h * n + j] = sc * scale;
    });
  }
  if (softcap > 0.0f) apply_softcap(scratch, int64_t(n_q) * n, softcap);
  softmax_rows_f16_weights(scratch, n_q, n);
  std::fill(out, out + int64_t(n_q) * head_dim, 0.0f);
  for_each_span_row<true>(kv, spans, head_off, [&](int64_t j, size_t, const kv_t* v, bool) {
    kv_load_scalar(row, v, head_dim);
    for (int h = 0; h < n_q; ++h) {
      const float p = scratch[h * n + j];
      float* o = out + int64_t(h) * head_dim;
      for (int d = 0; d < head_dim; ++d) o[d] += p * row[d];
    }
  });
}

void attend_group_scalar(float softcap, const float* q, int n_q, const PagedKvLayer& kv, const int32_t* table, int64_t lo,
                         int64_t hi, int kv_head, int head_dim, float scale, float* out, float* scratch) {
  const AttentionSpan all{table, lo, hi - lo + 1};
  attend_spans_scalar(softcap, q, n_q, kv, std::span<const AttentionSpan>(&all, 1), kv_head, head_dim, scale, out,
                      scratch);
}

}  // namespace attention_impl

namespace {
bool use_avx2() { return active_isa_level() >= IsaLevel::kAvx2; }
}  // namespace

void kv_store(kv_t* dst, const float* src, int n) {
  if (use_avx2()) attention_impl::kv_store_avx2(dst, src, n);
  else attention_impl::kv_store_scalar(dst, src, n);
}

void kv_load(float* dst, const kv_t* src, int n) {
  if (use_avx2()) attention_impl::kv_load_avx2(dst, src, n);
  else attention_impl::kv_load_scalar(dst, src, n);
}

void attend_group(const float* q, int n_q, const PagedKvLayer& kv, const int32_t* table, int64_t lo, int64_t hi,
                  int kv_head, int head_dim, float scale, float* out, float* scratch, float softcap) {
  if (use_avx2() && head_dim % 8 == 0 && head_dim <= 1024)
    attention_impl::attend_group_avx2(softcap, q, n_q, kv, table, lo, hi, kv_head, head_dim, scale, out, scratch);
  else
    attention_impl::attend_group_scalar(softcap, q, n_q, kv, table, lo, hi, kv_head, head_dim, scale, out, scratch);
}

void attend_spans(const float* q, int n_q, const PagedKvLayer& kv, std::span<const AttentionSpan> spans, int kv_head,
                  int head_dim, float scale, float* out, float* scratch, float softcap) {
  if (use_avx2() && head_dim % 8 == 0 && head_dim <= 1024)
    attention_impl::attend_spans_avx2(softcap, q, n_q, kv, spans, kv_head, head_dim, scale, out, scratch);
  else
    attention_impl::attend_spans_scalar(softcap, q, n_q, kv, spans, kv_head, head_dim, scale, out, scratch);
}

void attend_spans_many(std::span<const SpanQuery> queries, int n_q, const PagedKvLayer& kv,
                       std::span<const AttentionSpan> spans, int kv_head, int head_dim, float scale, float softcap) {
  if (use_avx2() && head_dim % 8 == 0 && head_dim <= 1024 && n_q <= attention_impl::kAvx2MaxGroup) {
    attention_impl::attend_spans_many_avx2(softcap, queries, n_q, kv, spans, kv_head, head_dim, scale);
    return;
  }
  // The scalar level and very wide groups: token by token, each over its own rows.
  std::vector<AttentionSpan> clipped;
  std::vector<float> scratch;
  for (const SpanQuery& sq : queries) {
    clip_spans(spans, sq.first_row, sq.n_rows, clipped);
    scratch.resize(size_t(n_q) * size_t(sq.n_rows));
    attend_spans(sq.q, n_q, kv, clipped, kv_head, head_dim, scale, sq.out, scratch.data(), softcap);
  }
}

void clip_spans(std::span<const AttentionSpan> spans, int64_t first_row, int64_t n_rows,
                std::vector<AttentionSpan>& out) {
  out.clear();
  const int64_t end = first_row + n_rows;
  int64_t j = 0;  // the first row of span s
  for (const AttentionSpan& s : spans) {
    const int64_t a = std::max(j, first_row), b = std::min(j + s.n, end);
    if (a < b) {
      AttentionSpan c = s;
      c.lo = s.lo + (a - j);
      c.n = b - a;
      if (s.n_overrides > 0) {  // the overrides inside the cut span, ascending as the span's are
        const int32_t* first = std::lower_bound(s.override_slots, s.override_slots + s.n_overrides, c.lo);
        const int32_t* last = std::lower_bound(first, s.override_slots + s.n_overrides, c.lo + c.n);
        const int64_t skip = first - s.override_slots;
        c.override_slots = first;
        c.n_overrides = last - first;
        c.override_k = s.override_k + skip * s.override_stride;
        c.override_v = s.override_v + skip * s.override_stride;
      }
      out.push_back(c);
    }
    j += s.n;
  }
}

float attention_score_bound(float scale, int head_dim, float q_norm, float k_norm) {
  const float rel = 0x1p-9f + float(2 * head_dim + 16) * 0x1p-24f;
  // f16 rounds values under 2^-14 to a multiple of 2^-24: at most 2^-25 per element, absolute.
  const float sub = 2.0f * std::sqrt(float(head_dim)) * 0x1p-25f * (q_norm + k_norm);
  return scale * (rel * q_norm * k_norm + sub);
}

float attention_spans_bound(float eps, float max_abs_v, int64_t n_rows) {
  const float grow = std::exp(2.0f * eps);
  // Weights: expm1(2 eps) from the scores, 2^-11 relative per f16 rounding on each side, subnormal
  // weights' absolute 2^-25 each; the f32 sums: n_rows * 2^-24 relative per side, with exp's 2e-7.
  const float weights = std::expm1(2.0f * eps) + 0x1p-11f * (1.0f + grow) + float(n_rows) * 0x1p-24f;
  const float sums = 2.0f * float(n_rows) * 0x1p-24f * grow + 1e-6f;
  return max_abs_v * (weights + sums);
}

void apply_softcap(float* x, int64_t n, float softcap) {
  const float inv = 1.0f / softcap;
  for (int64_t i = 0; i < n; ++i) x[i] = softcap * std::tanh(x[i] * inv);
}

}  // namespace agentkv
