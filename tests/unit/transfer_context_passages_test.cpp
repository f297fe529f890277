// Passages cut into a context and its continuation (lab/transfer/context_passages.h), as
// transfer-quality scores them and refine-transfer trains on them.
#include <gtest/gtest.h>

#include "lab/transfer/context_passages.h"

namespace agentkv {
namespace {

TEST(ContextPassages, CutsEachPassageAtSpacesAndSkipsShortOnes) {
  const std::string text =
      "one two three four five six seven eight nine ten\n\n"  // 50 bytes: context 14, continuation 12
      "short\n\n"                                             // nothing after its context: skipped
      "alpha beta gamma delta epsilon zeta eta theta";
  const auto p = context_passages(text, 14, 12, 0);
  ASSERT_EQ(p.size(), 2u);
  EXPECT_EQ(p[0].context, "one two three");
  EXPECT_EQ(p[0].continuation, " four five");
  EXPECT_EQ(p[1].context, "alpha beta");
  EXPECT_EQ(p[1].continuation, " gamma delta");
  EXPECT_EQ(context_passages(text, 14, 12, 1).size(), 1u);
  EXPECT_TRUE(context_passages("", 14, 12, 0).empty());
}

}  // namespace
}  // namespace agentkv
