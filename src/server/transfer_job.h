// An agent's context handed to another served model (POST /v1/agents/{id}/transfer) as two engine
// jobs, each on the engine that owns the KV it touches, chained on the engine thread (the HTTP thread
// posts once and waits on one mailbox):
//   1. on the sender's engine: the sender's tokens of the context whose K/V its resident context holds
//      (the longest common prefix of the two: a context that ends with a generated answer holds its
//      rendering but the closing marker) are copied into a private KV manager, so that the next job
//      reads them without touching the sender's engine;
//   2. on the receiver's engine: transfer/kv_transfer.h projects them into a new sequence of the
//      receiver's KV (the hybrid suffix and whatever the sender does not hold computed natively), and
//      the engine adopts it as a retained context: the new agent's.
// The sender's context is only read (through a fork of its snapshot, released in job 1).
#pragma once

#include <cstdint>
#include <optional>

#include "server/kv_jobs.h"
#include "server/server_state.h"
#include "transfer/chat_alignment.h"
#include "transfer/kv_transfer.h"

namespace agentkv {

struct ContextTransfer {
  const ServedTransferMap* map = nullptr;  // sender and receiver models, the map
  uint64_t sender_kv = 0;                  // the sender agent's retained context
  ChatContextAlignment aligned;            // both renderings of its messages, on one axis
  int64_t native_last = 0;                 // the hybrid suffix asked for
  double recompute = 0;                    // the hybrid-by-deviation share asked for
  double native_share = 0;                 // the hybrid suffix as a share of the context, asked for
  double rare_share = 0;                   // the hybrid-by-rarity share asked for (the map has counts)
  int64_t rare_max_tokens = 0;             // and its cap (0: none)
};

// The receiver layer whose K deviation chooses a hybrid's recomputed tokens: layers 0 and 1 run
// natively for every transferred token (transfer/kv_transfer.h; BENCHMARKS.md "Hybrid by deviation").
inline constexpr int kTransferCheckLayer = 1;

struct TransferredContext {
  KeptContext kept;            // on the receiver's engine (handle, tokens)
  KvTransferReport report;
  int64_t sender_tokens = 0;   // sender tokens whose K/V was read
  double seconds = 0;          // from job 1's start to job 2's end
  // The receiver's prefill rate so far (EngineMetrics) times the context's tokens; unset before it
  // has prefilled anything.
  std::optional<double> native_prefill_seconds_estimate;
};

// nullopt: the client went away (the new context, if made, was released).
std::optional<Result<TransferredContext>> transfer_context(ServerState& s, ContextTransfer t, HttpResponseWriter& w);

}  // namespace agentkv
