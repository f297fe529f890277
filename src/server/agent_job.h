// One agent turn (or a prefill for one) as the agents and rounds API runs it on the engine loop;
// shared by agents_api.cpp and round_sharing.cpp.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "server/api_server.h"
#include "engine/request_outcome.h"
#include "server/error_status.h"

namespace agentkv {

struct ApiServer::AgentJob {
  size_t model = 0;
  RequestParams params;
  // Filled from the engine's events.
  std::string text;
  FinishReason finish_reason = FinishReason::kNone;
  UsageCounts usage;
  uint64_t retained = 0;
  int64_t retained_tokens = 0;
  std::string error;
  ErrorCode error_code = ErrorCode::kInternal;  // with `error`: what kind (maps to the reply's status)
  bool done = false;
  uint64_t id = 0;
  // The round's shared block in params.prompt ([first, second) tokens; -1: not marked), and the
  // blended snapshot the turn starts from when the block was shared (released after the turn).
  std::pair<int64_t, int64_t> segment{-1, -1};
  uint64_t blended = 0;
  // When shared: the round's master snapshot (one per model and block, shared by the jobs of that
  // group), where the block starts in it, and the block-relative rows the collector recomputed for
  // this agent; after the turn the agent's context is compacted to master + diff.
  uint64_t master = 0;
  int32_t master_start = 0;
  std::vector<int32_t> diff_rows;
};

// The agents API's error replies and request bodies (agents_api.cpp), shared with step_scoring.cpp.
namespace agents_http {
void reply(HttpResponseWriter& w, const ApiError& e);
// The body as JSON, or nullopt after a 400; an empty body is {} when empty_ok.
std::optional<Json> parse_body(const HttpRequest& req, HttpResponseWriter& w, bool empty_ok);
}  // namespace agents_http

}  // namespace agentkv
