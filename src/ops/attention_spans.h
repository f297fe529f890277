// Attention over a context described as spans instead of one block table (issue 17, "restore inside
// attention"): ordinary paged spans, and master spans that read a shared segment's master K/V in
// place, stored at other RoPE positions, plus per-row overrides (an agent's diff rows). No dense
// per-agent copy of the segment is made.
// K is cached after RoPE. A master row stored at position p and seen by the agent at p + delta
// would be R(delta) k; since q·R(delta)k = (R(-delta) q)·k, a master span rotates the query once by
// -delta (Rope::shift, the same angles the dense re-rotation uses) and dots it with the stored K. V
// carries no position. Override rows are already at the agent's positions and take q as is.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "ops/attention.h"
#include "ops/rope.h"

namespace agentkv {

// n rows of the context, read at slots [lo, lo + n) of `table`.
struct AttentionSpan {
  const int32_t* table = nullptr;
  int64_t lo = 0;
  int64_t n = 0;
  // A master span: K is stored rope_delta positions before the agent sees it (rope: the layer's).
  const Rope* rope = nullptr;
  int64_t rope_delta = 0;
  // Rows whose K/V are given here instead (slots of `table`, ascending, each inside the span): row i's
  // K at override_k + i * override_stride, its V likewise (all kv_dim values; the head is picked here).
  const int32_t* override_slots = nullptr;
  int64_t n_overrides = 0;
  const kv_t* override_k = nullptr;
  const kv_t* override_v = nullptr;
  int64_t override_stride = 0;
};

// attend_group over the concatenation of `spans` (in order): the same arithmetic (q rounded to f16
// for the K dot, one softmax over all rows of all spans with f16 weights, f32 sums, softcap), so
// spans of plain rows give attend_group's result bit for bit. scratch must hold n_q * (rows of all
// spans) floats. A master span's rounding differs from a dense re-rotated copy's: the copy rounds
// R(delta)k to f16 and dots it with f16(q); here f16(R(-delta)q) meets the stored k. The computed
// rotations are exact transposes of each other (same angles, sin negated), so per score
//   |s_fused - s_dense| <= scale * (2^-9 + 2 * head_dim * 2^-24) * |q|_2 * |k|_2
// (four f16 roundings of a unit 2^-11 and the two f32 dots), which attention_spans_bound turns into
// a bound on the output (attention_score_bound states it).
void attend_spans(const float* q, int n_q, const PagedKvLayer& kv, std::span<const AttentionSpan> spans, int kv_head,
                  int head_dim, float scale, float* out, float* scratch, float softcap = 0.0f);

// One query token of attend_spans_many: its n_q query heads, where its output goes, and the rows it
// attends, rows [first_row, first_row + n_rows) of the concatenated spans.
struct SpanQuery {
  const float* q = nullptr;
  float* out = nullptr;
  int64_t first_row = 0;
  int64_t n_rows = 0;
};

// attend_spans for several query tokens of one sequence at once, each over its own range of the same
// spans (a causal prefill's tokens: the same start, each its own end; a sliding window: each its own
// window): every token's output is attend_spans' over the spans its rows cover, bit for bit (each score
// the same FMA chain, each softmax over the token's own rows, each V sum in row order), while a cached
// K/V row that several of the tokens attend is read and converted from f16 once for all of them instead
// of once per token (once per group of tokens when their scores together pass 16 MiB). Rows no token
// attends are never read.
void attend_spans_many(std::span<const SpanQuery> queries, int n_q, const PagedKvLayer& kv,
                       std::span<const AttentionSpan> spans, int kv_head, int head_dim, float scale,
                       float softcap = 0.0f);

// The spans covering rows [first_row, first_row + n_rows) of `spans`' concatenation (a plain span cut
// at a row, a master span's overrides cut with it): what attend_spans reads for a SpanQuery.
void clip_spans(std::span<const AttentionSpan> spans, int64_t first_row, int64_t n_rows,
                std::vector<AttentionSpan>& out);

// The bound above on one score's difference, for a query of norm q_norm and a master K row of norm
// k_norm (softcap does not widen it: it is 1-Lipschitz). Includes f16's subnormal absolute rounding.
float attention_score_bound(float scale, int head_dim, float q_norm, float k_norm);

// The largest |out_fused - out_dense| per element given eps, the largest score difference above, and
// max_abs_v, the largest |V| element attended: the weights move by a factor within e^(±2 eps) before
// their f16 rounding, which each side rounds by at most 2^-11 relative; plus the f32 sums' rounding.
float attention_spans_bound(float eps, float max_abs_v, int64_t n_rows);

}  // namespace agentkv
