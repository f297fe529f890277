// The one place where the engine's values become the wire's: an error's code (util/status.h) an HTTP
// status and an OpenAI error type, a FinishReason OpenAI's finish_reason. Handlers build their error
// replies with api_error() from the code set where the error arose (the engine, the KV budget, the
// agent registry), never from the wording of its message.
#pragma once

#include <string>

#include "engine/request.h"
#include "server/openai_protocol.h"
#include "util/status.h"

namespace agentkv {

// 400 invalid argument, 404 not found, 409 conflict (a busy agent), 413 too large (a body, a prompt
// over the context), 429 a count limit (agents held), 507 the KV cannot hold it (the budget, or what
// pins leave of it: then Retry-After), 503 shutting down (or cancelled by the server), 500 data loss
// or an internal error.
int http_status(ErrorCode code);
// The OpenAI error object's "type" for a status: invalid_request_error, rate_limit_error, server_error.
const char* openai_error_type(int status);

// The Retry-After of a request refused because pins hold the KV it needs (ErrorCode::kKvPinned):
// agents' contexts are released when deleted or expired, a round's own snapshots when it ends.
inline constexpr int kKvRetryAfterSeconds = 2;

ApiError api_error(ErrorCode code, std::string message, std::string param = "");
// "length" for kLength, "error" for kError (a stream that failed after tokens), else "stop" (a
// non-streamed answer that was cancelled or failed is replied as an error).
const char* openai_finish_reason(FinishReason r);

inline ApiError api_error(const Error& e, std::string param = "") { return api_error(e.code, e.message, std::move(param)); }

}  // namespace agentkv
