#include "ops/argmax.h"

#include <algorithm>
#include <cmath>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "util/status.h"

namespace agentkv {

int32_t argmax(const float* logits, int64_t n) {
  AGENTKV_CHECK(n >= 1);
  // std::max_element keeps its first element while it is NaN (every comparison with NaN is false);
  // that case, and short rows, take it as is.
#if defined(__SSE2__)
  if (n >= 16 && !std::isnan(logits[0])) {
    // Pass 1: the largest value (maxps skips a NaN in its first operand, as max_element skips NaNs
    // after the first element; the max of the others does not depend on their order).
    __m128 m = _mm_set1_ps(logits[0]);
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) m = _mm_max_ps(_mm_loadu_ps(logits + i), m);
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_shuffle_ps(m, m, 1));
    float best = _mm_cvtss_f32(m);
    for (; i < n; ++i)
      if (best < logits[i]) best = logits[i];
    // Pass 2: its first occurrence.
    const __m128 b = _mm_set1_ps(best);
    for (i = 0; i + 4 <= n; i += 4)
      if (_mm_movemask_ps(_mm_cmpeq_ps(_mm_loadu_ps(logits + i), b)) != 0) break;
    for (; i < n; ++i)
      if (logits[i] == best) return int32_t(i);
    AGENTKV_CHECK(false);
  }
#endif
  return int32_t(std::max_element(logits, logits + n) - logits);
}

}  // namespace agentkv
