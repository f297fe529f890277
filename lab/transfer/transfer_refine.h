// Refining a fitted transfer map by what the context is worth to the receiver. The ridge fit
// (transfer_fit.h) minimises K/V error, and lower K/V error has stopped buying value kept
// (BENCHMARKS.md, "Map levers again"); this descends the receiver's own loss instead. Per passage:
// the context is transferred with the current map (a hybrid: its last native_suffix_share computed by
// the receiver, as served), the receiver reads the continuation teacher-forced, and the NLL of
// sampled continuation positions (prm/next_token_pass.h: one token's pass over the frozen cache) is
// backpropagated into the transferred K/V, then through the map (y = W x, so dW = dY^T X, K's
// rotation undone) into its weights, one step per passage. The step is preconditioned by the
// features' Gram matrix (accumulated over the passages seen, with a ridge), D = dW (X^T X)^-1, i.e.
// steepest descent in the space of the map's outputs rather than of its weights: per-weight rates
// (Adam, tried first) let the few large sender features swing the outputs and the loss diverged
// within a step. Its length moves the transferred K/V by `lr` of their RMS. The suffix's and continuation's own
// K/V are held fixed within a passage (their dependence on the transferred K/V is left out: a
// truncated gradient) and rebuilt from the updated map at the next one. The loss is the metric
// transfer-quality reports (continuation NLL), so held-out text says whether a refinement helped.
#pragma once

#include <cstdint>
#include <map>
#include <string_view>
#include <vector>

#include "lab/transfer/ridge.h"
#include "model/loaded_model.h"
#include "transfer/transfer_map.h"
#include "util/status.h"
#include "util/thread_pool.h"

namespace agentkv {

struct TransferRefineOptions {
  // The receiver's own share of the context's last tokens, as the hybrid the server runs by default.
  double native_suffix_share = 0.15;
  // Continuation positions per passage whose NLL is the loss, spread evenly (0: every position).
  int queries = 32;
  // Each step changes the transferred K/V (all layers together) by this share of their RMS. 0.002
  // over 60 steps drifted far on held-out text; 0.0005 over 30 held level (BENCHMARKS.md).
  double lr = 0.0005;
  // The preconditioner's ridge, relative to each feature's energy (as the fit's alpha).
  double ridge_alpha = 1e-3;
};

struct RefineStepReport {
  double nll = 0;  // mean over the passage's queries, before the step
  int64_t queries = 0;
  int64_t projected_rows = 0;  // the context's transferred tokens the gradient reached
  double step_scale = 0;       // the step's length along D (0: no gradient)
};

class TransferRefiner {
 public:
  // Refuses a map of another pair and one conditioned on the receiver's first layers (its later
  // layers read the receiver's hidden states, which this gradient does not follow).
  static Result<TransferRefiner> create(TransferMap map, const LoadedModel& sender, const LoadedModel& receiver,
                                        TransferRefineOptions opt = {});
  // One passage: the loss, its gradient and one step. Fails (the map unchanged) on text either
  // tokenizer cannot round-trip, an empty continuation or a context with nothing to transfer.
  Result<RefineStepReport> step(std::string_view context, std::string_view continuation, ThreadPool& pool);
  const TransferMap& map() const { return map_; }

 private:
  TransferRefiner(TransferMap map, const LoadedModel& sender, const LoadedModel& receiver, TransferRefineOptions opt);

  TransferMap map_;
  const LoadedModel* sender_;
  const LoadedModel* receiver_;
  TransferRefineOptions opt_;
  std::map<int32_t, GramAccumulator> grams_;  // per first sender layer read: X^T X over the passages
};

}  // namespace agentkv
