// Reusing one shared segment's KV in many agents' contexts (TokenDance's KV collector on CacheBlend's
// selective recompute). In an all-gather round every agent's context is
// [private prefix][shared segment][own prompt]. The segment's master KV is computed once, at some
// positions; each agent's copy is
//   (a) the master re-rotated to the agent's positions (exact up to f16 rounding, model/kv_rerotate.h),
//   (b) then corrected where the agent's own prefix matters most: at a check layer the segment's
//       fresh K is computed with the agent's prefix in context, the tokens whose re-rotated master K
//       deviates most (a ratio R of them, plus the first few) are selected, and only those run
//       through the remaining layers, their hidden states carried over from the check layer.
// Unselected tokens keep the re-rotated master K/V at every layer, so an agent's KV is the master
// plus a sparse, token-granular diff: the recomputed slots reported here. R = 1 recomputes every
// token and gives exactly full prefill's K/V. All agents of a round go through one batched pass up
// to the check layer and one batched pass over all their selected tokens (batch-invariant, so the
// result equals doing the agents one at a time, bit for bit).
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "model/kv_rerotate.h"
#include "model/model.h"
#include "util/status.h"
#include "util/thread_pool.h"

namespace agentkv {

// The master copy of the segment: its slots (of some sequence's blocks) and the RoPE position its
// first token was computed at.
struct SegmentMaster {
  KvSlotRange slots;
  int32_t pos0 = 0;
};

// One agent's copy. Its prefix K/V must already be in slots [0, slot0) of the blocks (computed in
// batch-invariant mode if R = 1 is to match full prefill bit for bit); slots [slot0, slot0 + n) are
// overwritten. Blocks must not be shared with the master or another agent in the segment's range.
struct AgentSegment {
  SeqBlocks blocks;
  int32_t slot0 = 0;  // the segment's first slot in the agent's sequence (after its prefix)
  int32_t pos0 = 0;   // the RoPE position of the segment's first token for this agent
  // The agent's prefix read as spans (a context resumed in master–diff form); null: `blocks` alone.
  AttentionContext* context = nullptr;
};

struct RecomputeOptions {
  // Fraction of the segment's tokens recomputed by deviation (share/token_selection.h), in [0, 1].
  double ratio = 0.15;
  // Tokens at the start of the segment that are always recomputed: they sit right after the boundary
  // where the master's preceding context and the agent's differ, and cost a fixed few tokens.
  int n_first = 4;
  // The layer whose K deviation selects the tokens. Layer 0's K/V depend on the token and position
  // only (nothing has attended to the prefix yet), so after re-rotation they deviate by rounding
  // alone; layer 1 is the first that sees the new prefix, and the earliest check keeps the pass over
  // all tokens short. CacheBlend checks at layer 1 too (its deviation ranking holds across layers).
  int check_layer = 1;
  // Tokens at the end of the segment that are always recomputed (a transfer's native suffix, next to
  // the tokens to be generated). Their slots need not hold reused K/V.
  int n_last = 0;
};

struct AgentRecompute {
  // Slots of the agent's sequence whose K/V were recomputed at every layer, ascending: the diff
  // against the re-rotated master. The other segment slots hold the re-rotated master exactly.
  std::vector<int32_t> recomputed_slots;
  // Per segment token: squared L2 distance of fresh and re-rotated K at the check layer.
  std::vector<float> deviation;
};

// Fills every agent's segment slots as described above and reports each agent's diff, in agent
// order. segment_tokens are the segment's token ids (the master's). Errors (bad ranges, options,
// token ids) are returned before anything is written. Scratch grows with the round: about
// n_agents × n × (n_embd + kv_dim) floats plus the forward pass's activations for that many tokens,
// so a caller with hundreds of agents and long segments hands them over in groups (the result per
// agent does not depend on the grouping).
Result<std::vector<AgentRecompute>> selective_recompute(const Model& model, const KvArena& kv,
                                                        const SegmentMaster& master,
                                                        std::span<const int32_t> segment_tokens,
                                                        std::span<const AgentSegment> agents,
                                                        const RecomputeOptions& options, ThreadPool& pool);

// The recompute both reuse paths share (one implementation: sharing above, cross-model transfer in
// transfer/kv_transfer.h). Every agent's segment slots already hold reused K/V at every layer (a
// re-rotated master, a transferred cache), except the n_last tokens. Every segment token runs through
// layers [0, check_layer] natively, the tokens are selected by the deviation of the reused K from the
// fresh K at check_layer, and only the selected ones run through the remaining layers. Checks its
// arguments as selective_recompute does (no master).
struct RecomputeHooks {
  // Puts the reused K/V back into one agent's unselected tokens [begin, end) at layers
  // [0, check_layer]. Without it those layers keep the native K/V (a transfer has no master to stay
  // close to, and the native rows are the better ones).
  std::function<Status(size_t agent, int32_t begin, int32_t end)> restore;
  // Called once after the check pass with every segment token's hidden state after check_layer
  // ([n_agents][n][n_embd]), before the selected tokens run on: a caller that writes the later
  // layers' reused K/V only now (a receiver-conditioned transfer map) does it here. With ratio 0
  // the reused K at check_layer need not exist (no deviation is read).
  std::function<Status(const float* hidden)> after_check;
  // n_vocab floats (one agent, n_last >= 1): the logits after the segment's last token.
  float* last_logits = nullptr;
};
Result<std::vector<AgentRecompute>> recompute_deviating_tokens(const Model& model, const KvArena& kv,
                                                               std::span<const int32_t> segment_tokens,
                                                               std::span<const AgentSegment> agents,
                                                               const RecomputeOptions& options,
                                                               const RecomputeHooks& hooks, ThreadPool& pool);

}  // namespace agentkv
