// The server renders an agent's conversation with the chat template and tokenizes the shared blocks
// of its rounds on their own (server/agent_context.h). What collective KV sharing and resident-KV
// reuse rely on, on both real tokenizers: the block is the same token sequence in every agent's
// context, it is exactly the block tokenized alone, the pieces concatenate to the whole prompt, and
// an agent's next rendering starts with its previous one.
#include <gtest/gtest.h>

#include "model_test_util.h"
#include "server/agent_context.h"

namespace agentkv {
namespace {

using testing::real_model;

class AgentContextSegments : public ::testing::TestWithParam<std::string> {};

TEST_P(AgentContextSegments, SharedBlockIsTheSameTokensInEveryContext) {
  const Tokenizer& tok = *real_model(GetParam()).tokenizer;
  const std::string block = "Ada: The bridge is gone.\nBram: We will build a new one, stronger than before.";
  const std::vector<std::string> segments{block};
  std::vector<int32_t> first_block;
  for (const std::string persona : {"You are Ada, a baker.", "You are Bram, a blacksmith who talks a lot."}) {
    std::vector<ChatMessage> msgs{{"system", persona}, {"user", "Hello."}, {"assistant", "Hi there!"},
                                  {"user", block + "\n\nWhat do you do next?"}};
    auto c = agent_context_pieces(tok, msgs, segments, true);
    ASSERT_TRUE(c.ok()) << c.error();
    ASSERT_EQ(c->segments.size(), 1u);
    const auto [b, e] = c->segments[0];
    const std::vector<int32_t> got(c->tokens.begin() + b, c->tokens.begin() + e);
    EXPECT_EQ(got, tok.encode(block, false, false));
    if (first_block.empty()) first_block = got;
    EXPECT_EQ(got, first_block);
    if (tok.add_bos_default()) {
      EXPECT_EQ(c->tokens.front(), tok.bos_id());
    }

    // The next turn's rendering extends this one token for token (resident KV stays reusable).
    msgs.push_back({"assistant", "I will help."});
    msgs.push_back({"user", "And then?"});
    auto next = agent_context_pieces(tok, msgs, segments, true);
    ASSERT_TRUE(next.ok());
    ASSERT_EQ(next->segments.size(), 1u);
    EXPECT_EQ(next->segments[0], c->segments[0]);
    EXPECT_TRUE(std::equal(c->tokens.begin(), c->tokens.begin() + e, next->tokens.begin()));
  }
}

TEST_P(AgentContextSegments, BlockNotRenderedVerbatimIsNotReported) {
  const Tokenizer& tok = *real_model(GetParam()).tokenizer;
  std::vector<ChatMessage> msgs{{"user", "Nothing shared here."}};
  const std::vector<std::string> segments{"a block that is not in the conversation"};
  auto c = agent_context_pieces(tok, msgs, segments, true);
  ASSERT_TRUE(c.ok());
  EXPECT_TRUE(c->segments.empty());
  auto whole = agent_context_tokens(tok, msgs, {}, true);
  ASSERT_TRUE(whole.ok());
  EXPECT_EQ(c->tokens, *whole);
}

INSTANTIATE_TEST_SUITE_P(Models, AgentContextSegments, ::testing::Values("smollm2", "gemma3"));

}  // namespace
}  // namespace agentkv
