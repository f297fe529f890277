// The counted flops of a forward pass: a pass split anywhere costs what the whole pass costs, and
// the count matches a hand computation on a tiny shape.
#include <gtest/gtest.h>

#include "lab/prm/forward_flops.h"

namespace agentkv::prm {
namespace {

ModelConfig tiny() {
  ModelConfig c;
  c.n_layer = 2;
  c.n_embd = 8;
  c.n_ff = 16;
  c.n_head = 2;
  c.n_head_kv = 1;
  c.head_dim = 4;
  c.n_vocab = 10;
  return c;
}

TEST(ForwardFlops, MatchesAHandCountOnATinyShape) {
  const ModelConfig c = tiny();
  // Per token and layer: 2 * (8*8 [Q] + 2*8*4 [K, V] + 8*8 [O] + 3*8*16 [gate, up, down]) = 1152.
  // One token at position 0 attends to 1 position: 2 * 2 * 2 heads * 4 dims * 1 = 32 per layer.
  // LM head for one row: 2 * 8 * 10 = 160.
  EXPECT_DOUBLE_EQ(forward_flops(c, 0, 1, 1), 2 * (1152 + 32) + 160);
  // Two tokens at positions 5 and 6 attend to 6 and 7 positions.
  EXPECT_DOUBLE_EQ(forward_flops(c, 5, 2, 0), 2 * (2 * 1152 + 32 * 13));
}

TEST(ForwardFlops, SplittingAPassCostsTheSame) {
  const ModelConfig c = tiny();
  for (int64_t a : {1, 7, 100})
    for (int64_t b : {1, 13, 256})
      EXPECT_DOUBLE_EQ(forward_flops(c, 0, a + b, 1), forward_flops(c, 0, a, 0) + forward_flops(c, a, b, 1));
}

}  // namespace
}  // namespace agentkv::prm
