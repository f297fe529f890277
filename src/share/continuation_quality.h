// How far an approximate context (a shared segment reused at another position and selectively
// recomputed) moves the model from the exact one: both contexts read the same continuation (teacher
// forcing) in one batched forward, and the next-token distributions are compared position by
// position. Batch-invariant numerics make an identical context score exactly zero.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "kv/kv_manager.h"
#include "model/model.h"
#include "util/status.h"
#include "util/thread_pool.h"

namespace agentkv {

struct ContinuationQuality {
  int n_positions = 0;              // distributions compared: after the context, and after each continuation token but the last
  std::vector<double> kl;           // KL(exact || approximate) in nats, per position
  double mean_kl = 0;
  double p95_kl = 0;
  double max_kl = 0;
  double top1_agreement = 0;        // share of positions whose argmax tokens agree
  int first_disagreement = -1;      // first position whose argmax differs (-1: none)
  double nll_exact = 0;             // mean negative log-likelihood of the continuation, per token
  double nll_approx = 0;
};

// `exact` and `approx` hold the same tokens (their K/V differs); the continuation is scored after
// them without changing either (forks are used and released). Distribution i predicts
// continuation[i]; only i >= score_from enter the statistics (e.g. an agent's own prompt is read
// first, its answer scored).
Result<ContinuationQuality> compare_continuation(const Model& model, KvManager& kv, const KvSequence& exact,
                                                 const KvSequence& approx, std::span<const int32_t> continuation,
                                                 ThreadPool& pool, size_t score_from = 0);

}  // namespace agentkv
