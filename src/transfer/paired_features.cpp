#include "transfer/paired_features.h"

namespace agentkv {

void pooled_sender_features(const LayerKv& sender, const TokenAlignment& alignment, size_t receiver_token, float* x) {
  const int32_t first = alignment.first[receiver_token], count = alignment.count[receiver_token];
  AGENTKV_CHECK(count > 0 && first + count <= sender.n_tokens);
  const int d = sender.kv_dim;
  for (int i = 0; i < 2 * d; ++i) x[i] = 0.0f;
  for (int32_t s = first; s < first + count; ++s) {
    const float* k = sender.k_row(s);
    const float* v = sender.v_row(s);
    for (int i = 0; i < d; ++i) {
      x[i] += k[i];
      x[d + i] += v[i];
    }
  }
  const float inv = 1.0f / float(count);
  for (int i = 0; i < 2 * d; ++i) x[i] *= inv;
  x[2 * d] = 1.0f;
}

}  // namespace agentkv
