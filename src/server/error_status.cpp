// Error codes to HTTP statuses and finish reasons to OpenAI's (see error_status.h); tested in
// tests/unit/error_status_test.cpp.
#include "server/error_status.h"

#include <utility>

namespace agentkv {

int http_status(ErrorCode code) {
  switch (code) {
    case ErrorCode::kInvalidArgument: return 400;
    case ErrorCode::kNotFound: return 404;
    case ErrorCode::kConflict: return 409;
    case ErrorCode::kTooLarge: return 413;
    case ErrorCode::kLimitReached: return 429;
    // Admission before work (engine/kv_admission.h): one status for "the KV cannot hold it", whether
    // the budget is too small or pins hold too much now (then with Retry-After).
    case ErrorCode::kResourceExhausted:
    case ErrorCode::kKvPinned: return 507;
    // A client that cancels has gone away; a cancellation it hears about came from the server
    // stopping its work, so it is told to come back later.
    case ErrorCode::kUnavailable:
    case ErrorCode::kCancelled: return 503;
    case ErrorCode::kDataLoss:
    case ErrorCode::kInternal: return 500;
  }
  return 500;
}

const char* openai_error_type(int status) {
  if (status == 401) return "authentication_error";
  if (status == 429) return "rate_limit_error";
  if (status >= 500) return "server_error";
  return "invalid_request_error";
}

const char* openai_finish_reason(FinishReason r) {
  if (r == FinishReason::kLength) return "length";
  if (r == FinishReason::kError) return "error";  // a stream cut by a failure never reads as a stop
  return "stop";
}

ApiError api_error(ErrorCode code, std::string message, std::string param) {
  const int status = http_status(code);
  ApiError e{status, std::move(message), std::move(param), openai_error_type(status)};
  if (code == ErrorCode::kKvPinned) e.retry_after_s = kKvRetryAfterSeconds;
  return e;
}

}  // namespace agentkv
