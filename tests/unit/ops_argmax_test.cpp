// argmax equals std::max_element on every shape greedy decoding meets: ties (lowest index wins), the
// maximum in the scalar tail, infinities, NaNs (skipped, unless the first element is NaN), and -0/+0.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "ops/argmax.h"

namespace agentkv {
namespace {

int32_t reference(const std::vector<float>& v) { return int32_t(std::max_element(v.begin(), v.end()) - v.begin()); }

TEST(Argmax, EqualsMaxElement) {
  std::mt19937 rng(11);
  std::normal_distribution<float> g(0.0f, 3.0f);
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  for (int64_t n : {1, 3, 4, 15, 16, 17, 31, 64, 257, 1000, 262144}) {
    for (int variant = 0; variant < 8; ++variant) {
      std::vector<float> v(static_cast<size_t>(n));
      for (auto& x : v) x = variant == 1 ? float(int(g(rng))) : g(rng);  // variant 1: many ties
      std::uniform_int_distribution<int64_t> at(0, n - 1);
      if (variant == 2) v[size_t(at(rng))] = inf;
      if (variant == 3) v[size_t(n - 1)] = 1e30f;  // in the tail
      if (variant == 4)
        for (int k = 0; k < 5; ++k) v[size_t(at(rng))] = nan;
      if (variant == 5) v[0] = nan;
      if (variant == 6) std::fill(v.begin(), v.end(), -0.0f), v[size_t(at(rng))] = 0.0f;
      if (variant == 7) std::fill(v.begin(), v.end(), -inf);
      ASSERT_EQ(argmax(v.data(), n), reference(v)) << "n " << n << " variant " << variant;
    }
  }
}

}  // namespace
}  // namespace agentkv
