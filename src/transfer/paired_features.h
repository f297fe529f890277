// The input row of a transfer map for one receiver token: the aligned sender tokens' un-rotated K
// and V at the mapped sender layer, combined over the run by a pooling rule, then a constant 1 for
// the bias. The rule is fixed at fitting time and recorded in the map (a map fitted on one rule
// is wrong for another), and issue 6 asks for the choice to be measured; BENCHMARKS.md has it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "transfer/layer_kv.h"
#include "transfer/token_alignment.h"

namespace agentkv {

// How a receiver token that spans several sender tokens combines them:
//  mean    - uniform average over the run: no sender token is favoured.
//  overlap - linear interpolation by characters: each sender token weighted by the bytes it shares
//            with the receiver token, so a sender token that only grazes it contributes little.
//  last    - the run's last sender token only: under causal attention it is the one that has read
//            all of the receiver token's text.
enum class SpanPooling : uint8_t { mean = 0, overlap = 1, last = 2 };

std::string_view span_pooling_name(SpanPooling p);
std::optional<SpanPooling> parse_span_pooling(std::string_view name);

// Per receiver token, the weights of its sender run (they sum to 1 where the run is non-empty),
// flattened: token r's weights are w[offset[r] .. offset[r] + alignment.count[r]).
struct SpanWeights {
  SpanPooling pooling = SpanPooling::mean;
  std::vector<float> w;
  std::vector<int64_t> offset;
};
SpanWeights span_weights(const TokenAlignment& alignment, const TokenSpans& receiver, const TokenSpans& sender,
                         SpanPooling pooling);

// x has 2 * sender.kv_dim + 1 floats. The receiver token must have a non-empty sender run.
void pooled_sender_features(const LayerKv& sender, const TokenAlignment& alignment, const SpanWeights& weights,
                            size_t receiver_token, float* x);

// A window of consecutive sender layers (transfer_map.h, sender_window): each layer's pooled K/V
// one after the other, then the constant 1: x has layers.size() * 2 * kv_dim + 1 floats.
void pooled_sender_window_features(std::span<const LayerKv* const> layers, const TokenAlignment& alignment,
                                   const SpanWeights& weights, size_t receiver_token, float* x);

// The tail of a receiver-conditioned map's row (transfer_map.h): the receiver's hidden state after
// its first layers, h (dim floats), divided by its RMS as every block's input is, so that the map
// reads the token's direction rather than the residual stream's growing scale.
void receiver_hidden_features(const float* h, int dim, float* x);

}  // namespace agentkv
