// The one outcome folder (engine/request_outcome.h) without a model: the rule for the last token, the
// finish reason, usage, the retained handle and the error's code.
#include <gtest/gtest.h>

#include "engine/request_outcome.h"

namespace agentkv {
namespace {

RequestEvent token(int32_t t, const std::string& text, int n_generated) {
  RequestEvent ev;
  ev.has_token = true;
  ev.token = t;
  ev.text = text;
  ev.n_prompt = 5;
  ev.n_generated = n_generated;
  return ev;
}

TEST(RequestOutcome, EndOfGenerationTokenIsNotPartOfTheAnswer) {
  RequestOutcome o;
  fold(o, token(10, "Hi", 1));
  RequestEvent last = token(2, "", 1);  // the EOG that ended it: n_generated does not count it
  last.eog = true;
  last.seq_finished = last.request_finished = true;
  last.finish_reason = FinishReason::kStop;
  last.retained_kv = 7;
  last.retained_tokens = 6;
  fold(o, last);
  EXPECT_EQ(o.tokens, std::vector<int32_t>{10});
  EXPECT_EQ(o.text, "Hi");
  EXPECT_EQ(o.n_generated, int(o.tokens.size()));
  EXPECT_EQ(o.finish, FinishReason::kStop);
  EXPECT_EQ(o.retained_kv, 7u);
  EXPECT_EQ(o.retained_tokens, 6);
  EXPECT_EQ(o.n_prompt, 5);
  EXPECT_TRUE(o.request_finished);
  EXPECT_FALSE(o.error);
}

TEST(RequestOutcome, TokenCompletingAStopStringIsPartOfTheAnswer) {
  RequestOutcome o;
  fold(o, token(10, "a", 1));
  RequestEvent last = token(11, "", 2);  // its text was cut with the stop string
  last.seq_finished = last.request_finished = true;
  last.finish_reason = FinishReason::kStop;
  fold(o, last);
  EXPECT_EQ(o.tokens, (std::vector<int32_t>{10, 11}));
  EXPECT_EQ(o.n_generated, int(o.tokens.size()));
  EXPECT_EQ(o.text, "a");
}

TEST(RequestOutcome, ErrorKeepsItsCode) {
  RequestOutcome o;
  RequestEvent ev;
  ev.seq_finished = ev.request_finished = true;
  ev.finish_reason = FinishReason::kError;
  ev.error = "not enough free KV blocks";
  ev.error_code = ErrorCode::kResourceExhausted;
  fold(o, ev);
  ASSERT_TRUE(o.error);
  EXPECT_EQ(o.error->code, ErrorCode::kResourceExhausted);
  EXPECT_EQ(o.finish, FinishReason::kError);
  EXPECT_STREQ(finish_reason_name(o.finish), "error");
}

}  // namespace
}  // namespace agentkv
