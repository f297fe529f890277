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
};

class TransferFitter {
 public:
  TransferFitter(const LoadedModel& sender, const LoadedModel& receiver, TransferFitOptions opt = {});
  // Runs both models over one passage and accumulates its rows. Fails (and adds nothing) when the
  // text does not round-trip through either tokenizer.
  Status add_passage(std::string_view text, ThreadPool& pool);
  int64_t n_rows() const { return n_rows_; }
  Result<TransferMap> solve() const;

 private:
  const LoadedModel& sender_;
  const LoadedModel& receiver_;
  TransferFitOptions opt_;
  std::vector<int32_t> sender_layer_;
  std::map<int32_t, GramAccumulator> grams_;  // by sender layer: receiver layers mapped to one share it
  std::vector<CrossAccumulator> cross_;       // by receiver layer
  int64_t n_rows_ = 0;
};

}  // namespace agentkv
