// One agent turn (or a prefill for one) as the agents and rounds API runs it on the engine loop;
// shared by agents_api.cpp and step_scoring.cpp.
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
  // The round's shared block in params.prompt ([first, second) tokens; -1: not marked).
  std::pair<int64_t, int64_t> segment{-1, -1};
};

// The agents API's error replies and request bodies (agents_api.cpp), shared with step_scoring.cpp.
namespace agents_http {
void reply(HttpResponseWriter& w, const ApiError& e);
// The body as JSON, or nullopt after a 400; an empty body is {} when empty_ok.
std::optional<Json> parse_body(const HttpRequest& req, HttpResponseWriter& w, bool empty_ok);
}  // namespace agents_http

}  // namespace agentkv
