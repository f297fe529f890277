// Fitting a transfer map: both models read the same calibration passages; each receiver token
// gives one row (pooled sender K/V at the mapped sender layer → the receiver's own un-rotated K and
// V), accumulated into normal equations; solve() is one ridge solve per receiver layer.
#pragma once

#include <cstdint>
#include <map>
#include <string_view>
#include <vector>

#include "model/loaded_model.h"
#include "lab/transfer/ridge.h"
#include "transfer/transfer_map.h"
#include "util/thread_pool.h"

namespace agentkv {

struct TransferFitOptions {
  double ridge_alpha = 1e-4;  // penalty per feature = alpha * its energy; see ridge_solve
  // Receiver tokens [0, native_prefix) are computed natively when the map is applied (BOS / the
  // first token: context-free attention sinks with outlying K/V), so they are not fitted either.
  int native_prefix = 1;
  // Recorded in the map. overlap: measured best of the three rules, by a small margin (BENCHMARKS.md,
  // "Pooling a receiver token's sender run").
  SpanPooling pooling = SpanPooling::overlap;
  // Per-layer ridge chosen by held-out error: with a grid, every holdout_every-th passage is held
  // out, each receiver layer's alpha is the grid value whose map (fitted on the rest) gives the least
  // held-out K/V squared error, and the layer is then refitted on all passages with it. Empty: one
  // ridge_alpha for every layer.
  std::vector<double> alpha_grid;
  int holdout_every = 5;
  // > 0: a receiver-conditioned map (transfer/transfer_map.h): each row also holds the receiver's
  // own hidden state after this many of its layers, which it computes natively when applying it.
  int receiver_hidden_layers = 0;
  // Consecutive sender layers each receiver layer reads (transfer_map.h, sender_window), centred on
  // its depth-proportional one.
  int sender_window = 1;
};

// What choosing the alphas measured: per receiver layer, the held-out relative squared error
// (||Y - XW||^2 / ||Y||^2) of each grid alpha, and the chosen one.
struct AlphaChoice {
  std::vector<std::vector<double>> heldout_error;  // [layer][grid index]
  std::vector<double> alpha;                       // per layer
  int64_t n_heldout_rows = 0;
};

class TransferFitter {
 public:
  TransferFitter(const LoadedModel& sender, const LoadedModel& receiver, TransferFitOptions opt = {});
  // Runs both models over one passage and accumulates its rows. Fails (and adds nothing) when the
  // text does not round-trip through either tokenizer.
  Status add_passage(std::string_view text, ThreadPool& pool);
  int64_t n_rows() const { return n_rows_; }
  // With an alpha grid, `choice` (if given) receives what the choice measured.
  Result<TransferMap> solve(AlphaChoice* choice = nullptr) const;

 private:
  int hidden_dim() const { return opt_.receiver_hidden_layers > 0 ? receiver_.config().n_embd : 0; }

  const LoadedModel& sender_;
  const LoadedModel& receiver_;
  TransferFitOptions opt_;
  std::vector<int32_t> sender_layer_;
  std::map<int32_t, GramAccumulator> grams_;  // by first sender layer: receiver layers mapped to one window share it
  std::vector<CrossAccumulator> cross_;       // by receiver layer
  int64_t n_rows_ = 0;
  std::vector<uint32_t> token_counts_;  // per receiver token id, over every passage added
  // The held-out passages' accumulators (alpha grid only): as above, plus ||Y||^2 per receiver layer.
  std::map<int32_t, GramAccumulator> heldout_grams_;
  std::vector<CrossAccumulator> heldout_cross_;
  std::vector<double> heldout_yy_;
  int64_t n_heldout_rows_ = 0;
  int64_t n_passages_ = 0;
};

}  // namespace agentkv
