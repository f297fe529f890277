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

#include "model/kv_arena.h"
#include "model/model_config.h"
#include "transfer/layer_kv.h"
#include "transfer/token_alignment.h"
#include "util/thread_pool.h"

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

// The window of consecutive sender layers a map's receiver layer reads, un-rotated from the
// sender's cache (slots [0, n_tokens) of `table`), each layer read again only when the window moves:
// what applying a map (kv_transfer.cpp) and refining one (lab/transfer/transfer_refine.cpp) share.
class SenderWindow {
 public:
  SenderWindow(const ModelConfig& sender, const KvArena& arena, std::span<const int32_t> table, int64_t n_tokens,
               int window);
  // Layers first .. first + window - 1, spread over the pool.
  void load(int32_t first, ThreadPool& pool);
  // Rows i in [0, n) of x (row_stride floats apart) get receiver token first_token + i's pooled
  // features (pooled_sender_window_features); the rest of a row is the caller's.
  void features(const TokenAlignment& alignment, const SpanWeights& weights, int64_t first_token, int64_t n, float* x,
                int64_t row_stride, ThreadPool& pool) const;
  // Row i of x gets receiver token tokens[i]'s (the tokens a hybrid does not recompute).
  void features(const TokenAlignment& alignment, const SpanWeights& weights, std::span<const int64_t> tokens, float* x,
                int64_t row_stride, ThreadPool& pool) const;

 private:
  const ModelConfig& cfg_;
  const KvArena& arena_;
  std::span<const int32_t> table_;
  LayerRopeTables ropes_;
  std::vector<LayerKv> layers_;
  std::vector<int32_t> loaded_;
  std::vector<const LayerKv*> view_;
};

// The tail of a receiver-conditioned map's row (transfer_map.h): the receiver's hidden state after
// its first layers, h (dim floats), divided by its RMS as every block's input is, so that the map
// reads the token's direction rather than the residual stream's growing scale.
void receiver_hidden_features(const float* h, int dim, float* x);

}  // namespace agentkv
