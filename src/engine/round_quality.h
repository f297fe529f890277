// Quality of a collective round against exact prefill (issue 5's measure, DESIGN "Measuring"): for
// every shared turn, its answer is read under the blended copy it was answered from and under the
// exact context (a full prefill of the same tokens) and the next-token distributions compared
// (KL, top-1, perplexity), and the exact context's own greedy answer is compared with it. Or, for
// master–diff storage in a lossy diff format (issue 17), the same against the turn's new context as
// stored (restored from master + diff: what a later turn resumes from), with a greedy answer
// generated from it. One implementation for the start-up quality gate and bench-agents, both on
// their own engine.
#pragma once

#include <vector>

#include "engine/collective_round.h"
#include "share/continuation_quality.h"

namespace agentkv {

struct TurnQuality {
  bool measured = false;        // a shared turn with a non-empty answer
  ContinuationQuality quality;  // over the answer's tokens (the own prompt is read, not scored)
  double greedy_agreement = 0;  // leading answer tokens equal to the exact context's greedy ones, / compared
};

// Which approximate context is compared with the exact one: the blended copy the turn answered from,
// or the turn's new context as stored (identical to the blended copy's prefix with a lossless diff).
enum class ApproxContext { kBlended, kStored };

// `result` is a finished round of `turns` run with keep_blended. Steps `engine` until idle (its
// caller owns the engine thread); the contexts it makes are released before it returns. Turns whose
// blended copy was not kept (CollectiveRoundOptions::keep_only: a sample of a large round) are not
// measured.
Result<std::vector<TurnQuality>> measure_round_quality(Engine& engine, const std::vector<RoundTurn>& turns,
                                                       const CollectiveRoundResult& result, int greedy_tokens,
                                                       ApproxContext approx = ApproxContext::kBlended);

}  // namespace agentkv
