#include "share/token_selection.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "util/status.h"

namespace agentkv {

std::vector<int32_t> select_tokens(std::span<const float> deviation, double ratio, int n_first, int n_last) {
  AGENTKV_CHECK(ratio >= 0.0 && ratio <= 1.0 && n_first >= 0 && n_last >= 0);
  const int32_t n = int32_t(deviation.size());
  const int32_t first = std::min(n, n_first);
  const int32_t last_begin = std::max(first, n - n_last);
  // The small epsilon keeps ratio * n that is an integer in exact arithmetic (0.15 * 20) from
  // rounding up to the next token.
  const int32_t by_deviation = std::min(last_begin - first, int32_t(std::ceil(ratio * double(n) - 1e-9)));
  std::vector<int32_t> rest(static_cast<size_t>(last_begin - first));
  std::iota(rest.begin(), rest.end(), first);
  std::partial_sort(rest.begin(), rest.begin() + by_deviation, rest.end(), [&](int32_t a, int32_t b) {
    return deviation[a] != deviation[b] ? deviation[a] > deviation[b] : a < b;
  });
  std::vector<int32_t> out(static_cast<size_t>(first));
  std::iota(out.begin(), out.end(), 0);
  out.insert(out.end(), rest.begin(), rest.begin() + by_deviation);
  for (int32_t i = last_begin; i < n; ++i) out.push_back(i);
  std::sort(out.begin() + first, out.end());
  return out;
}

}  // namespace agentkv
