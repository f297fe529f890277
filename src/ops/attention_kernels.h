// Internal: the per-ISA implementations behind ops/attention.h.
#pragma once

#include <cstddef>
#include <span>

#include "ops/attention.h"
#include "ops/attention_spans.h"

namespace agentkv::attention_impl {

using AttendFn = void (*)(const float*, int, const PagedKvLayer&, const int32_t*, int64_t, int64_t, int, int,
                          float, float*, float*);
using StoreFn = void (*)(kv_t*, const float*, int);
using LoadFn = void (*)(float*, const kv_t*, int);

// Both ISAs' attend_spans; attend_group is attend_spans over one plain span.
void attend_spans_scalar(float softcap, const float* q, int n_q, const PagedKvLayer& kv,
                         std::span<const AttentionSpan> spans, int kv_head, int head_dim, float scale, float* out,
                         float* scratch);
void attend_spans_avx2(float softcap, const float* q, int n_q, const PagedKvLayer& kv,
                       std::span<const AttentionSpan> spans, int kv_head, int head_dim, float scale, float* out,
                       float* scratch);
// The widest query group the AVX2 kernels block in registers (attend_spans_avx2 splits wider ones).
inline constexpr int kAvx2MaxGroup = 8;
// attend_spans_many with AVX2 + F16C, for n_q <= kAvx2MaxGroup (attend_spans_many runs other groups, and
// the scalar level, token by token through attend_spans).
void attend_spans_many_avx2(float softcap, std::span<const SpanQuery> queries, int n_q, const PagedKvLayer& kv,
                            std::span<const AttentionSpan> spans, int kv_head, int head_dim, float scale);

// Calls fn(j, s, row, master) for each row j of the spans in order (s: its span's index), with
// `row` this head's K (or V with kV) and `master` true for a row read from a master span's blocks
// (an override row is already at the agent's positions).
template <bool kV, class Fn>
inline void for_each_span_row(const PagedKvLayer& kv, std::span<const AttentionSpan> spans, int64_t head_off, Fn&& fn) {
  int64_t j = 0;
  for (size_t s = 0; s < spans.size(); ++s) {
    const AttentionSpan& sp = spans[s];
    int64_t o = 0;
    for (int64_t i = 0; i < sp.n; ++i, ++j) {
      const int64_t slot = sp.lo + i;
      if (o < sp.n_overrides && sp.override_slots[o] == slot) {
        fn(j, s, (kV ? sp.override_v : sp.override_k) + o * sp.override_stride + head_off, false);
        ++o;
      } else {
        const int32_t b = sp.table[slot / kv.block_size];
        const int off = int(slot % kv.block_size);
        fn(j, s, (kV ? kv.v(b, off) : kv.k(b, off)) + head_off, sp.rope != nullptr);
      }
    }
  }
}

// Whether no span reads a master or carries override rows.
inline bool plain_spans(std::span<const AttentionSpan> spans) {
  for (const AttentionSpan& s : spans)
    if (s.rope || s.n_overrides) return false;
  return true;
}

// The rows of all spans.
inline int64_t span_rows(std::span<const AttentionSpan> spans) {
  int64_t n = 0;
  for (const AttentionSpan& s : spans) n += s.n;
  return n;
}

void attend_group_scalar(float softcap, const float* q, int n_q, const PagedKvLayer& kv, const int32_t* table, int64_t lo,
                         int64_t hi, int kv_head, int head_dim, float scale, float* out, float* scratch);
void kv_store_scalar(kv_t* dst, const float* src, int n);
void kv_load_scalar(float* dst, const kv_t* src, int n);

// AVX2 + F16C (attention_avx2.cpp). head_dim must be a multiple of 8; other sizes use scalar.
void attend_group_avx2(float softcap, const float* q, int n_q, const PagedKvLayer& kv, const int32_t* table, int64_t lo,
                       int64_t hi, int kv_head, int head_dim, float scale, float* out, float* scratch);
void kv_store_avx2(kv_t* dst, const float* src, int n);
void kv_load_avx2(float* dst, const kv_t* src, int n);

// Softmax of each of n_q rows of n scores in place, then rounds the weights to f16 as ggml does.
void softmax_rows_f16_weights(float* scratch, int n_q, int64_t n);

}  // namespace agentkv::attention_impl
