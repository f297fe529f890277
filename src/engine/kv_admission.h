// Admission before work: the one check that a request (or a whole round) can ever get the KV it may
// need, made before any prefill. A request whose worst case (prompt + max_tokens, n samples) cannot
// fit the KV that retained contexts do not pin would otherwise compute, then fail mid-generation
// when the scheduler finds nothing left to preempt. One condition, one code: kResourceExhausted when
// even the whole budget could not hold it, kKvPinned when the budget could but pins hold too much
// now (waiting for agents to be released or expire, or for a round's own snapshots, can help). Both
// are HTTP 507 (server/error_status.h). A request that fits the unpinned KV but not what is free at
// this moment is not refused: the scheduler queues it (and preempts) until running requests finish.
// No model here, so it is tested without one (tests/unit/kv_admission_test.cpp).
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "kv/block_pool.h"
#include "util/status.h"

namespace agentkv {

// KV blocks a request may hold at its longest: prompt + max_tokens tokens (capped at n_ctx) for
// sample 0, and for each of the n - 1 other samples (forks sharing the prompt's blocks) its generated
// tokens' blocks plus a copy of the prompt's partial last block.
int64_t worst_case_blocks(int64_t prompt_tokens, int64_t max_tokens, int n, int64_t n_ctx, int block_size);

// The budget as admission sees it. pinned: blocks referenced by anything that is neither a scheduled
// sequence nor the reclaimable segment cache (retained snapshots: agents' contexts, a round's).
struct KvBudget {
  int64_t total_blocks = 0;
  int64_t pinned_blocks = 0;
  int block_size = 16;
};

// What a request (or round) asks of the budget: `need` blocks at most, of which `reused` are pinned
// blocks it shares (the full blocks of the retained context it resumes from), so it needs
// need - reused blocks of the unpinned KV.
struct KvDemand {
  int64_t need_blocks = 0;
  int64_t reused_blocks = 0;
  int64_t tokens = 0;  // the worst-case tokens behind need_blocks, for the message
};

// The one fit check. Ok when need - reused <= total - pinned; else kResourceExhausted (it could
// never fit: need - reused > total) or kKvPinned (it could, once pins are released), the message
// naming `what`, the blocks and tokens it needs and how many blocks are free of pins.
Status check_kv_fit(const KvDemand& d, const KvBudget& b, const std::string& what);

// Blocks whose reference count (in pool) is higher than the references `unpinned_refs[block]` held
// by scheduled sequences and the segment cache: the pinned blocks. unpinned_refs has pool.n_blocks()
// entries.
int64_t count_pinned_blocks(const BlockPool& pool, std::span<const int32_t> unpinned_refs);

}  // namespace agentkv
