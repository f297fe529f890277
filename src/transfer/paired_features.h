// The input row of a transfer map for one receiver token: the aligned sender tokens' un-rotated K
// and V at the mapped sender layer, mean-pooled over the run (pooling is what keeps a receiver token
// that spans several sender tokens from favouring one of them), then a constant 1 for the bias.
#pragma once

#include <cstddef>

#include "transfer/layer_kv.h"
#include "transfer/token_alignment.h"

namespace agentkv {

// x has 2 * sender.kv_dim + 1 floats. The receiver token must have a non-empty sender run.
void pooled_sender_features(const LayerKv& sender, const TokenAlignment& alignment, size_t receiver_token, float* x);

}  // namespace agentkv
