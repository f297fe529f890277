#include "ops/attention.h"

#include <algorithm>
#include <cmath>

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

void attend_group_scalar(float softcap, const float* q, int n_q, const PagedKvLayer& kv, const int32_t* table, int64_t lo,
                         int64_t hi, int kv_head, int head_dim, float scale, float* out, float* scratch) {
  const int64_t n = hi - lo + 1;
  const int64_t head_off = int64_t(kv_head) * head_dim;
  float qh[1024];
  float row[1024];
  for (int h = 0; h < n_q; ++h) {
    for (int d = 0; d < head_dim; ++d) qh[d] = round_through_fp16(q[h * head_dim + d]);
    for (int64_t j = 0; j < n; ++j) {
      const int64_t slot = lo + j;
      kv_load_scalar(row, kv.k(table[slot / kv.block_size], int(slot % kv.block_size)) + head_off, head_dim);
      float s = 0.0f;
      for (int d = 0; d < head_dim; ++d) s += qh[d] * row[d];
      scratch[h * n + j] = s * scale;
    }
  }
  if (softcap > 0.0f) apply_softcap(scratch, int64_t(n_q) * n, softcap);
  softmax_rows_f16_weights(scratch, n_q, n);
  std::fill(out, out + int64_t(n_q) * head_dim, 0.0f);
  for (int64_t j = 0; j < n; ++j) {
    const int64_t slot = lo + j;
    kv_load_scalar(row, kv.v(table[slot / kv.block_size], int(slot % kv.block_size)) + head_off, head_dim);
    for (int h = 0; h < n_q; ++h) {
      const float p = scratch[h * n + j];
      float* o = out + int64_t(h) * head_dim;
      for (int d = 0; d < head_dim; ++d) o[d] += p * row[d];
    }
  }
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

void apply_softcap(float* x, int64_t n, float softcap) {
  const float inv = 1.0f / softcap;
  for (int64_t i = 0; i < n; ++i) x[i] = softcap * std::tanh(x[i] * inv);
}

}  // namespace agentkv
