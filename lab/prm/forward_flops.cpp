#include "lab/prm/forward_flops.h"

namespace agentkv::prm {

double forward_flops(const ModelConfig& c, int64_t first, int64_t n, int64_t logit_rows) {
  const double d = c.n_embd, q = c.q_dim(), kv = c.kv_dim(), ff = c.n_ff;
  const double per_token_layer = 2 * (d * q + 2 * d * kv + q * d + 3 * d * ff);
  // Sum over the tokens of their context lengths (pos + 1).
  const double ctx = double(n) * double(first) + double(n) * double(n + 1) / 2;
  const double attention = 2 * 2 * double(c.n_head) * double(c.head_dim) * ctx;
  return double(c.n_layer) * (double(n) * per_token_layer + attention) + 2 * d * double(c.n_vocab) * double(logit_rows);
}

}  // namespace agentkv::prm
