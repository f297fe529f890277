// Floating-point operations of a forward pass, counted per token from the model's shape: every
// matrix product (2 flops per multiply-add: Q, K, V, O, gate, up, down), attention over the
// token's context (Q.K and the weighted sum of V, per head and layer) and the LM head for each row
// whose logits are read. Norms, RoPE and softmax are left out (under 1% at these sizes).
#pragma once

#include <cstdint>

#include "model/model_config.h"

namespace agentkv::prm {

// Tokens at positions [first, first + n), each attending to every earlier position and itself.
double forward_flops(const ModelConfig& c, int64_t first, int64_t n, int64_t logit_rows);

}  // namespace agentkv::prm
