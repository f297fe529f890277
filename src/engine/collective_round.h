// One all-gather round on an engine as ONE engine-thread job (TokenDance, issue 5; issue 13): the
// only implementation of a round, used by the server's /v1/rounds, bench-agents --mode tokendance,
// the tests and the start-up quality gate. Every agent's turn is [prefix][shared block][own]; agents
// of the engine whose turns hold the same block (two or more) share it:
//   1. each agent's prefix is prefilled from its resident context (kv_from) and the block's master
//      once, as [BOS][block] or in a sharing agent's own context (EngineOptions::master_context),
//      all as ordinary scheduler requests,
//   2. the KV collector (engine/segment_collector.h) builds every agent's copy of the block from
//      the master in one collective step,
//   3. every turn runs from its blended copy (or its resident context when not shared),
//   4. each shared agent's new context is compacted to master + diff (Engine::compact_retained),
// then one callback gets every turn's outcome and the sharing report. When the turns' contexts do not
// all fit the KV that resident contexts leave unpinned, the round runs in waves of the turns that
// fit (1-4 per wave; the masters once, kept until the last wave), so a society larger than one
// budget's worth of dense contexts still runs; only a turn that cannot fit beside the masters even
// alone is refused before any work. The job is a state machine
// driven by its requests' completion callbacks, so other traffic is served between its steps; it
// never waits. All or nothing: on any error (or cancel) every snapshot it made is released and the
// turns' resident contexts are left as they were.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "engine/engine.h"
#include "engine/request_outcome.h"

namespace agentkv {

// What a round did about sharing (the server reports it in the round's "kv_sharing").
struct RoundSharingReport {
  std::string mode = "exact";   // "tokendance" or "exact"
  std::string reason;           // why exact, when sharing was asked for
  double recompute = 1.0;
  int agents = 0;               // agents whose copy of the block came from the collector
  int64_t segment_tokens = 0;
  int64_t recomputed_tokens = 0;  // all agents
  int64_t master_tokens_computed = 0;  // prefill of the masters not served by the prefix cache
  // Where the masters were computed: "block" ([BOS][block]) or "agent" (a member's own context,
  // EngineOptions::master_context; "block" where the budget could not hold that beside the largest
  // turn); empty when nothing was shared.
  std::string master_context;
  double collector_seconds = 0;
  int waves = 0;                  // the round ran in this many waves (1: all turns at once)
};

struct RoundTurn {
  // The whole context to answer from (prompt), its sampling, and kv_from: the agent's resident
  // context (0: none). retain_kv is forced on: the new context is the outcome.
  RequestParams params;
  std::pair<int64_t, int64_t> segment{-1, -1};  // the round's shared block in params.prompt; -1: none
};

struct RoundTurnOutcome {
  // The turn's answer, folded from its events (engine/request_outcome.h); answer.retained_kv is the
  // new resident context (compacted when shared).
  RequestOutcome answer;
  double ttft = -1;             // seconds from the job's start
  bool shared = false;
  int64_t recomputed = 0;       // block tokens the collector recomputed for this agent
  uint64_t blended = 0;         // with keep_blended: the copy the turn started from (caller releases)
  uint64_t prefix = 0;          // with keep_blended: the exact prefix the copy was blended onto (likewise)
};

struct CollectiveRoundOptions {
  std::optional<double> recompute;  // the share of the block recomputed; unset: no sharing
  std::string exact_reason;         // reported when unset
  // On success, release every turn's kv_from (superseded by its new context). Off when the caller
  // commits several engines' rounds together (finish_collective_round).
  bool release_resumed = true;
  // Measurement (bench, gate): keep each shared turn's blended copy, its prefix and the masters;
  // the caller releases them (CollectiveRoundResult::masters, RoundTurnOutcome::blended, ::prefix).
  bool keep_blended = false;
  // With keep_blended: the turns whose copy and prefix are kept (empty: every turn). A kept copy
  // stays pinned through the later waves, so a measurement on a large round keeps a sample.
  std::vector<bool> keep_only;
};

struct CollectiveRoundResult {
  Status status;                   // an error: nothing of the round is retained
  std::vector<RoundTurnOutcome> turns;
  RoundSharingReport sharing;
  // keep_blended: per shared turn, the master snapshot of its block and where the block starts in it.
  std::vector<std::pair<uint64_t, int32_t>> masters;
};

using CollectiveRoundDone = std::function<void(CollectiveRoundResult&&)>;

class CollectiveRound;

// Starts the round on `engine` (call on the engine thread); `done` runs once, on the engine thread.
// The returned handle may be kept to cancel (engine thread too); the job keeps itself alive.
std::shared_ptr<CollectiveRound> start_collective_round(Engine& engine, std::vector<RoundTurn> turns,
                                                        CollectiveRoundOptions options, CollectiveRoundDone done);
// Cancels the job's requests; it then fails ("cancelled") and releases what it made.
void cancel_collective_round(CollectiveRound& job);

// For a round committed across engines (release_resumed off): on commit, releases the resumed
// contexts `resumed`; otherwise releases everything the successful round made.
void finish_collective_round(Engine& engine, const CollectiveRoundResult& result, const std::vector<uint64_t>& resumed,
                             bool commit);

}  // namespace agentkv
