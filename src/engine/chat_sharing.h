// Collective KV sharing for ordinary chat completions (issue 14): a chat request as ONE engine-thread
// job that reuses the KV other requests already computed for the same messages, wherever they sit.
// Multi-agent frameworks send every agent's turn as [own system prompt][the shared transcript]: the
// transcript's messages are TokenDance's all-gather blocks, at a different position after a
// different prefix in every agent's request.
//
// Across servers sharing a Redis tier (kv/redis_tier.h): a context kept here publishes an index record
// of each of its exact segments (kv/segment_index_record.h); a request whose message no stored
// context holds first looks the message up there and, on a hit, rebuilds that master (an exact
// prefix request over the record's tokens: the full blocks come from the tier, the rest is computed)
// before it plans, so a message computed on one server is blended on another without being prefilled
// there first. At most max_master_fetches masters per request; any failure just prefills.
//
// The request's prompt comes tokenized piece by piece (share/turn_pieces.h), each message's content
// on its own, so a message is the same token ids wherever it appears. The job plans on the engine
// thread, from the longest exact reuse to the least exact:
//   1. exact prefix-cache hits (kv/kv_manager.h) always come first and stay exact;
//   2. a stored context (kv/segment_store.h) that shares a longer common prefix (the same
//      conversation's earlier turn, whose later part was blended) is resumed as it is;
//   3. after that, runs of whole message segments (and the role headers between them) that a stored
//      context holds contiguously are reused from it as their master: the context before the run is
//      prefilled (exactly), then the collector (engine/blend_queue.h, share/kv_collector.h) re-rotates
//      the master to the request's positions and recomputes the share R of its tokens that deviate
//      most, batched with every other request blending the same run in that engine step;
//   4. whatever is left (new messages, the generation prompt) is prefilled exactly from the blended
//      context, and the answer generated.
// The finished context (prompt and answer) goes into the segment store as a master for later
// requests, its blended runs as master + diff (engine/chat_contexts.h). Blended K/V is marked approximate, so it never enters the exact prefix index and is
// never reported as cached_tokens. A blend the KV budget cannot hold falls back to exact prefill.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "engine/engine.h"

namespace agentkv {

// What a chat request's sharing did (the server's "kv_sharing" object and usage).
struct ChatSharingReport {
  std::string mode = "exact";     // "tokendance" when any KV was reused approximately
  std::string reason;             // why nothing was shared, when nothing was
  double recompute = 0;
  int64_t cached_tokens = 0;      // exact prefix hits (OpenAI's cached_tokens)
  int64_t resumed_tokens = 0;     // approximate KV reused from a stored context's common prefix
  int64_t segment_tokens = 0;     // prompt tokens blended from masters (runs of segments)
  int64_t recomputed_tokens = 0;  // of those, recomputed
  int segments = 0;               // message segments blended
  // Masters rebuilt from a shared tier's segment index records before planning (see above), and the
  // tokens of those masters whose exact KV was reused (restored from a tier or RAM) or computed.
  int fetched_masters = 0;
  int64_t master_tokens_restored = 0;
  int64_t master_tokens_computed = 0;
  // With keep_start: the context the answer started from (the caller releases it) and its tokens.
  uint64_t start_handle = 0;
  int64_t start_tokens = 0;
  // Tokens whose KV was reused approximately and not recomputed.
  int64_t shared_tokens() const { return resumed_tokens + segment_tokens - recomputed_tokens; }
};

struct ChatSharingRequest {
  RequestParams params;  // the prompt (as pieces: see above); kv_from and retain_kv are the job's
  // Token ranges [begin, end) of the prompt's message segments, in order.
  std::vector<std::pair<int64_t, int64_t>> segments;
  double recompute = 0.15;
  uint64_t request_id = 0;       // the answering request's id (Engine::next_request_id), for cancel
  // Set by another thread to give up; the job checks it between its phases (the answering request
  // itself is cancelled by id).
  std::shared_ptr<std::atomic<bool>> cancelled;
  bool keep_start = false;       // measurement (the quality gate): keep the start context
  int min_run_tokens = 16;       // shorter runs are prefilled exactly (a blend costs an extra step)
  // Masters rebuilt from the shared tier per request (0: none); only for segments of at least
  // min_run_tokens tokens that no stored context holds.
  int max_master_fetches = 4;
};

// Called with the answering request's events (n_cached_prompt: exact hits only; retained_kv: 0).
// The report is complete when the event with request_finished arrives; a job that fails before
// answering sends one final event with the error (or kCancelled).
using ChatEventFn = std::function<void(const RequestEvent&, const ChatSharingReport&)>;

// Starts the job on the engine thread.
void start_chat_request(Engine& engine, ChatSharingRequest request, ChatEventFn on_event);

}  // namespace agentkv
