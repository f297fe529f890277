// The cost of scoring one step after a trajectory of L tokens, KV-PRM against text PRM: wall time
// (median of repeats), counted flops (forward_flops.h) and the KV bytes each holds while scoring.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "model/loaded_model.h"
#include "prm/verify_head.h"
#include "util/thread_pool.h"

namespace agentkv::prm {

struct ScoringCost {
  int64_t trajectory_tokens = 0;
  double kv_seconds = 0, text_seconds = 0;      // median per score
  double kv_flops = 0, text_flops = 0;
  int64_t kv_bytes = 0, text_bytes = 0;         // KV blocks the score itself needs
  double score_delta = 0;                       // |KV-PRM - text PRM| score on the same trajectory
};

// trajectory: token ids (the policy's context), at least max(lengths) long; the first L are used
// for each length L. The policy's cache of those L tokens is prefilled once, outside the timing.
Result<std::vector<ScoringCost>> measure_scoring_cost(const LoadedModel& lm, std::span<const int32_t> trajectory,
                                                      std::span<const int64_t> lengths, const VerifyHead& head,
                                                      int repeats, ThreadPool& pool);

}  // namespace agentkv::prm
