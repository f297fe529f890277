#include "ops/attention.h"

#include <algorithm>
#include <cmath>

#include "ops/fp16.h"

namespace agentkv {

namespace {

// Eight independent partial sums let the compiler vectorise without reassociation flags.
inline float dot(const float* a, const float* b, int n) {
  float s[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int i = 0;
  for (; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; ++j) s[j] += a[i + j] * b[i + j];
  float r = ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
  for (; i < n; ++i) r += a[i] * b[i];
  return r;
}

}  // namespace

void kv_store_fp16_rounded(float* dst, const float* src, int n) {
  for (int i = 0; i < n; ++i) dst[i] = round_through_fp16(src[i]);
}

void attend_head(const float* q, const PagedKvLayer& kv, const int32_t* block_table, int64_t lo,
                 int64_t hi, int kv_head, int head_dim, float scale, float* out, float* scratch) {
  const int64_t n = hi - lo + 1;
  const int64_t head_off = int64_t(kv_head) * head_dim;
  float q16[1024];
  for (int d = 0; d < head_dim; ++d) q16[d] = round_through_fp16(q[d]);
  float max_s = -INFINITY;
  for (int64_t j = 0; j < n; ++j) {
    const int64_t slot = lo + j;
    const float* k = kv.k(block_table[slot / kv.block_size], int(slot % kv.block_size)) + head_off;
    const float s = dot(q16, k, head_dim) * scale;
    scratch[j] = s;
    max_s = std::max(max_s, s);
  }
  double sum = 0.0;
  for (int64_t j = 0; j < n; ++j) {
    const float e = std::exp(scratch[j] - max_s);
    scratch[j] = e;
    sum += e;
  }
  const float inv = float(1.0 / sum);
  std::fill(out, out + head_dim, 0.0f);
  for (int64_t j = 0; j < n; ++j) {
    const int64_t slot = lo + j;
    const float* v = kv.v(block_table[slot / kv.block_size], int(slot % kv.block_size)) + head_off;
    const float p = round_through_fp16(scratch[j] * inv);
    for (int d = 0; d < head_dim; ++d) out[d] += p * v[d];
  }
}

}  // namespace agentkv
