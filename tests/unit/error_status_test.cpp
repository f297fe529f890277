// Error codes: AGENTKV_TRY / AGENTKV_ASSIGN_OR_RETURN carry them unchanged, and the server's one
// mapping (server/error_status.h) turns each into its HTTP status and OpenAI error type.
#include <gtest/gtest.h>

#include "server/error_status.h"
#include "util/status.h"

namespace agentkv {
namespace {

Result<int> fails_with(ErrorCode code) { return make_error(code, "it failed"); }

Status try_it(ErrorCode code) {
  AGENTKV_TRY(fails_with(code));
  return {};
}

Result<int> assign_it(ErrorCode code) {
  int x = 0;
  AGENTKV_ASSIGN_OR_RETURN(x, fails_with(code));
  return x + 1;
}

TEST(ErrorCode, DefaultIsInvalidArgument) {
  Status st = make_error("bad field");
  EXPECT_EQ(st.code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(st.error(), "bad field");
}

TEST(ErrorCode, MacrosPropagateTheCode) {
  for (ErrorCode c : {ErrorCode::kNotFound, ErrorCode::kResourceExhausted, ErrorCode::kUnavailable,
                      ErrorCode::kDataLoss}) {
    Status st = try_it(c);
    ASSERT_FALSE(st.ok());
    EXPECT_EQ(st.code(), c) << error_code_name(c);
    EXPECT_EQ(st.error(), "it failed");
    Result<int> r = assign_it(c);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.code(), c) << error_code_name(c);
  }
}

TEST(ErrorStatus, EveryCodeHasItsStatus) {
  EXPECT_EQ(http_status(ErrorCode::kInvalidArgument), 400);
  EXPECT_EQ(http_status(ErrorCode::kNotFound), 404);
  EXPECT_EQ(http_status(ErrorCode::kConflict), 409);
  EXPECT_EQ(http_status(ErrorCode::kTooLarge), 413);
  EXPECT_EQ(http_status(ErrorCode::kLimitReached), 429);
  EXPECT_EQ(http_status(ErrorCode::kResourceExhausted), 507);
  EXPECT_EQ(http_status(ErrorCode::kUnavailable), 503);
  EXPECT_EQ(http_status(ErrorCode::kCancelled), 503);
  EXPECT_EQ(http_status(ErrorCode::kDataLoss), 500);
  EXPECT_EQ(http_status(ErrorCode::kInternal), 500);
}

TEST(ErrorStatus, ApiErrorTakesStatusAndTypeFromTheCode) {
  const ApiError shutting = api_error(make_error(ErrorCode::kUnavailable, "the engine is shutting down"));
  EXPECT_EQ(shutting.status, 503) << "shutting down is not the client's fault";
  EXPECT_EQ(shutting.type, "server_error");
  EXPECT_EQ(shutting.message, "the engine is shutting down");
  const ApiError kv = api_error(ErrorCode::kResourceExhausted, "raise --kv-mem");
  EXPECT_EQ(kv.status, 507);
  EXPECT_EQ(kv.type, "server_error");
  EXPECT_EQ(kv.retry_after_s, 0);  // the budget cannot hold it: waiting does not help
  // Pins hold the KV now: the same status, and waiting can help.
  const ApiError pinned = api_error(ErrorCode::kKvPinned, "agents hold the KV");
  EXPECT_EQ(pinned.status, 507);
  EXPECT_EQ(pinned.retry_after_s, kKvRetryAfterSeconds);
  const ApiError agents = api_error(ErrorCode::kLimitReached, "too many agents");
  EXPECT_EQ(agents.status, 429);
  EXPECT_EQ(agents.type, "rate_limit_error");
  const ApiError busy = api_error(ErrorCode::kConflict, "busy", "agent");
  EXPECT_EQ(busy.status, 409);
  EXPECT_EQ(busy.type, "invalid_request_error");
  EXPECT_EQ(busy.param, "agent");
}

TEST(ErrorStatus, FinishReasonsHaveOpenAiNames) {
  EXPECT_STREQ(openai_finish_reason(FinishReason::kLength), "length");
  EXPECT_STREQ(openai_finish_reason(FinishReason::kStop), "stop");
  // A stream that failed after tokens never ends as a stop.
  EXPECT_STREQ(openai_finish_reason(FinishReason::kError), "error");
  EXPECT_STREQ(finish_reason_name(FinishReason::kCancelled), "cancelled");
}

}  // namespace
}  // namespace agentkv
