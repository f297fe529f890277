// The server's agents: each holds a conversation and the handle of its retained KV snapshot on its
// model's engine (pinned until the agent is deleted or its TTL runs out). Thread-safe. An operation
// on agents (respond, round, fork, delete) first acquires them, which marks them busy, so two
// operations never interleave on one agent and nothing is lost when one fails.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "server/openai_protocol.h"
#include "tokenizer/chat_template.h"

namespace agentkv {

struct Agent {
  std::string id, name;
  size_t model = 0;
  std::vector<ChatMessage> messages;
  uint64_t kv = 0;              // retained snapshot on the model's engine (0: none)
  int64_t kv_tokens = 0;        // tokens in it
  int64_t created = 0;          // unix seconds
  double ttl_s = 0;             // sliding: every use moves expires_at to now + ttl_s
  double expires_at = 0;
  bool busy = false;
  std::string last_answer;      // the latest assistant message: what a default round shares
  // The shared blocks of the rounds it took part in, in order: tokenized on their own in every
  // rendering of its context (server/agent_context.h), whether or not a round shared their KV.
  std::vector<std::string> segments;
};

// The bytes of text an agent holds: its messages' contents and tool-call arguments, its last answer
// and its rounds' shared segments (what the server-wide text budget counts).
size_t agent_text_bytes(const Agent& a);

class AgentRegistry {
 public:
  // max_text_bytes: the budget of agent_text_bytes over all agents held.
  explicit AgentRegistry(size_t max_agents, size_t max_text_bytes = SIZE_MAX)
      : max_agents_(max_agents), max_text_bytes_(max_text_bytes) {}

  // Assigns a fresh id ("agent-…") and stores the agent; 429 when the registry is full or the agent's
  // text would pass the budget.
  std::optional<ApiError> add(Agent* a);
  // Marks every listed agent busy and copies them out, all or none: 404 names an unknown id, 409 a
  // busy one.
  std::optional<ApiError> acquire(const std::vector<std::string>& ids, std::vector<Agent>* out);
  // Ends an operation on an acquired agent: stores `a` (its new state) and clears busy.
  void finish(const Agent& a);
  // finish() for an operation that added text: when the new state would pass the text budget,
  // nothing is stored (the agent keeps its old state, idle) and the error is 429.
  std::optional<ApiError> finish_grown(const Agent& a);
  // Ends an operation that changed nothing.
  void abandon(const std::string& id);
  // Removes an idle agent (404 unknown, 409 busy); the caller releases its KV.
  std::optional<ApiError> remove(const std::string& id, Agent* removed);
  // Removes and returns idle agents whose TTL ran out.
  std::vector<Agent> take_expired(double now);
  // Removes and returns every agent (shutdown).
  std::vector<Agent> take_all();

  std::optional<Agent> get(const std::string& id) const;
  std::vector<Agent> list() const;
  size_t size() const;
  size_t count_on_model(size_t model) const;
  size_t text_bytes() const;  // agent_text_bytes over all agents held

 private:
  std::optional<ApiError> over_text_budget(size_t bytes) const;  // mu_ held; bytes: the total it would be

  size_t max_agents_, max_text_bytes_;
  size_t text_bytes_ = 0;  // agent_text_bytes over agents_
  mutable std::mutex mu_;
  std::map<std::string, Agent> agents_;
  uint64_t counter_ = 0;
};

// Wall-clock unix time in seconds (TTLs are reported as unix timestamps).
double unix_seconds();

}  // namespace agentkv
