// Multi-agent workloads for bench-agents: deterministic from a seed, prompts as plain text (so both
// the instruct and the base model can read them, and a shared block is the same token sequence for
// every agent). The model writes the agents' messages: the harness runs each round's prompts on the
// engine and hands the replies back through record().
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "util/status.h"

namespace agentkv {

struct WorkloadOptions {
  int n_agents = 0;   // 0: the workload's default
  int n_rounds = 0;   // 0: the workload's default
  uint64_t seed = 1;
  // The town workloads (generative-agents, agent-society, long-history-society): the round digest
  // quotes at most this many of the previous round's messages (a subset drawn from the seed and the
  // round, the same for every agent), so a large town still fits the model's context.
  int digest_messages = 32;
};

// One agent's request in a round. The prompt is the agent's whole context for this turn:
// [private_prefix][shared part][own instruction]. The harness tokenizes it (with BOS) and generates
// up to max_tokens (greedy unless the workload asks otherwise).
struct AgentTurn {
  int agent = 0;
  std::string prompt;
  int max_tokens = 48;
  int min_tokens = 0;        // the harness ignores end-of-generation before this many tokens
  // Character offsets of the segments inside prompt, so later sharing modes can mark them:
  // [0, private_end) private, [private_end, shared_end) shared by every agent of the round.
  // Each segment ends with a newline and the next one starts with a non-space character, so a
  // tokenizer splits the same way at the boundaries for every agent. The harness tokenizes the
  // three pieces separately in every mode (lab/agents/tokendance_round.h, turn_tokens).
  size_t private_end = 0;
  size_t shared_end = 0;
  // Ranges inside [0, private_end) also tokenized on their own (ascending, disjoint): a workload whose
  // contexts accumulate (long-history-society) marks every earlier round's shared block and the agent's
  // answer to it, so a turn tokenizes its history piece by piece exactly as the turns before it did and
  // the agent's context from its last turn is a token prefix of its next prompt (up to its answer,
  // whose text re-tokenizes to what was generated or not).
  std::vector<std::pair<size_t, size_t>> earlier_pieces;
  // For each earlier piece, whether it is a shared block (an earlier round's digest, held by every
  // agent of that round) rather than the agent's own text: what bench-agents counts as shareable when
  // it states the floor of an agent's private tokens. Empty: none is.
  std::vector<bool> earlier_piece_shared;
};

class Workload {
 public:
  virtual ~Workload() = default;
  virtual std::string name() const = 0;
  virtual int n_agents() const = 0;
  virtual int n_rounds() const = 0;
  // The turns of round r (0-based), in agent order. Valid once rounds 0..r-1 were recorded.
  virtual std::vector<AgentTurn> round(int r) = 0;
  // The generated text of round r's turns, same order as round(r) returned them. r must be the
  // round just produced and not yet recorded, with one reply per turn (checked: a mismatch is a
  // harness bug and aborts). Replies are cleaned (trimmed, cut at the first newline, whitespace
  // collapsed; "(says nothing)" when empty) before they enter later prompts; chain keeps a few
  // lines of its plan and step reports.
  virtual void record(int r, const std::vector<std::string>& replies) = 0;
};

// "generative-agents", "agent-society", "long-history-society", "debate", "chain"; an error names an
// unknown workload or an agent / round count outside the workload's range.
Result<std::unique_ptr<Workload>> make_workload(const std::string& name, const WorkloadOptions& opt);
std::vector<std::string> workload_names();

}  // namespace agentkv
