// The agents API's KV protocols, each ONE job on the engine thread (posted or submitted once), the
// HTTP thread waiting on its mailbox: creating a context (prefill and keep), forking one, releasing
// one, and running agents' turns (respond, rounds) as collective-round jobs. HTTP threads never touch
// the KV: they carry a context's handle as an opaque id in the agent registry, and freeing one is a
// job too (release_context). When the client goes away a job is cancelled, its result still waited
// for, and whatever it kept released.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "engine/collective_round.h"
#include "server/server_state.h"

namespace agentkv {

struct KeptContext {
  uint64_t handle = 0;     // the engine's retained snapshot
  int64_t tokens = 0;
  int cached_tokens = 0;   // of the prompt, from the prefix cache or the resumed context
};

// The one way the server frees a context: a job on its model's engine (0: nothing to free).
void release_context(EngineLoop& loop, size_t model, uint64_t handle);

// Computes `prompt` (no sampling) and keeps it as a new context. nullopt: the client went away
// (nothing is kept, nothing was replied).
std::optional<Result<KeptContext>> prefill_context(EngineLoop& loop, size_t model, std::vector<int32_t> prompt,
                                                   HttpResponseWriter& w);
// A new context sharing every block of `from` (which stays); its handle is 0 if `from` could not be
// read (the fork then has no resident context). `tokens` is not filled: the fork has `from`'s.
std::optional<Result<KeptContext>> fork_context(EngineLoop& loop, size_t model, uint64_t from, HttpResponseWriter& w);

// Queues the exact full blocks of context `handle` for the shared KV tiers again (an agent about to
// move to another server): the blocks queued, 0 for none (no shared tier, or a compact context),
// kNotFound for an unknown handle.
std::optional<Result<int64_t>> publish_context(EngineLoop& loop, size_t model, uint64_t handle, HttpResponseWriter& w);

// One agent's answer in a turn.
struct TurnAnswer {
  std::string text;
  FinishReason finish_reason = FinishReason::kNone;
  UsageCounts usage;
};

// One turn of each agent (acquired; messages ending with what it answers), all scheduled together as
// one collective-round job per model (engine/collective_round.h), committed together. On success each
// agent gets its answer and new context and is finished in the registry; on failure each is abandoned
// as it was and the error has been replied (nothing, if the client went away). With `sharing` (a
// round's recompute ratio), each model's agents whose context holds the round's block share its KV.
bool run_turns(ServerState& s, std::vector<Agent>& agents, const SamplingFields& gen, HttpResponseWriter& w,
               std::vector<TurnAnswer>* answers, std::optional<double> sharing = std::nullopt,
               RoundSharingReport* report = nullptr);

}  // namespace agentkv
