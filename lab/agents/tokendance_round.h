// bench-agents' tokendance mode: one round of a workload run through the product's collective-round
// job (engine/collective_round.h), the same job /v1/rounds runs: every agent's prefix is prefilled
// from its resident context (kept from its previous round, as the server keeps it), the block's
// master once, the collector blends every agent's copy in one collective step, each turn runs from
// its copy and each new context is compacted to master + diff. This file only builds the turns from
// the workload's plain-text prompts and measures: time, KV, and (optional, not timed) quality:
// every agent's answer scored under its blended context and under the exact one (full prefill),
// and the exact context's own greedy answer compared with it; or, for a diff format's cost, the
// agent's new context as stored (master + diff restored) with a greedy answer generated from it.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "engine/round_quality.h"
#include "share/continuation_quality.h"
#include "share/selective_recompute.h"
#include "workload.h"

namespace agentkv {

// A turn's prompt tokens, tokenized piece by piece at its marked segment boundaries
// ([BOS][private prefix] [shared block] [own prompt]): every mode tokenizes turns this way, so modes
// differ only in how they compute the same tokens.
struct TurnTokens {
  std::vector<int32_t> prefix, segment, own;
  // Tokens of `prefix` in earlier shared blocks (AgentTurn::earlier_piece_shared).
  int64_t earlier_shared_tokens = 0;
  std::vector<int32_t> all() const;
};
TurnTokens turn_tokens(const Tokenizer& tok, const AgentTurn& t);

struct TokendanceOptions {
  RecomputeOptions recompute;
  bool measure_quality = true;
  // The agents (AgentTurn::agent) whose answers are measured; empty: every agent (bench-agents --sample).
  std::set<int> quality_agents;
  ApproxContext quality_of = ApproxContext::kStored;
  int greedy_tokens = 32;   // free-running agreement is compared over this many tokens
};

struct TokendanceAgentOut {
  std::string text;
  std::vector<int32_t> tokens;  // the answer (end-of-generation excluded)
  double ttft = -1;             // from the round's start
  int64_t prompt_tokens = 0;
  int64_t segment_recomputed = 0;
  // The agent's context after the round (prompt and answer) less every token of a block it shared
  // (this round's, if shared, and earlier rounds' it keeps): what no sharing can remove.
  int64_t private_tokens = 0;
  // Quality (when measured and the answer is not empty).
  bool has_quality = false;
  ContinuationQuality quality;
  double greedy_agreement = 0;  // leading tokens equal to the exact context's greedy answer, / compared
};

struct TokendanceRoundOut {
  std::vector<TokendanceAgentOut> agents;
  int64_t segment_tokens = 0;        // per agent
  int64_t prefill_computed = 0;      // prefix + master + recomputed segment tokens + own prompts
  int64_t prefill_reused = 0;        // prompt tokens not computed (prefix cache + segment reuse)
  double prefill_seconds = 0;        // engine prefill (prefixes, master, own prompts) + the collector
  double collector_seconds = 0;      // the collective step alone
  // The same reuse done agent by agent (measured when asked; on a quality sample, the sampled
  // agents' time scaled to every shared agent).
  double collector_per_agent_seconds = 0;
  int waves = 0;                     // the round's waves (collective_round.h): > 1 when the budget split it
  std::string master_context;        // where its masters were computed (RoundSharingReport::master_context)
  double round_seconds = 0;
  int64_t resident_blocks = 0;       // pool blocks after master–diff conversion (all agents)
  int64_t diff_blocks = 0;           // of those, the diffs' packed rows (all agents)
  int64_t diff_bytes = 0;            // the diffs' row records, not rounded to blocks (all agents)
  int64_t echo_tokens = 0;           // own text stored as echoes this round (EngineMetrics::echo_tokens)
  int64_t shared_blocks = 0;         // of those, held for more than one agent (masters, common prefixes)
  int64_t peak_blocks = 0;
  int64_t preemptions = 0;
};

// Runs round `turns` on `engine` (prefix caching on), owning the engine thread (run_until_idle).
// The turns' segments mark a shared block (AgentTurn::private_end/shared_end); agents holding the
// same block share it, the rest run as plain turns. `resident`: each agent's retained context
// (AgentTurn::agent → handle), resumed from and replaced by the round's.
Result<TokendanceRoundOut> run_tokendance_round(Engine& engine, ThreadPool& pool, const std::vector<AgentTurn>& turns,
                                                const TokendanceOptions& opt, bool time_per_agent,
                                                std::map<int, uint64_t>* resident);

}  // namespace agentkv
