// Model::forward_layers: a pass split at a layer is the same pass. Selective recompute (src/share/)
// relies on both properties checked here, bit for bit:
// - layers [0, l) then [l, L) over the same tokens give the logits and K/V of one forward;
// - resuming [l, L) on a subset of the tokens (their hidden rows gathered) gives those tokens what
//   the whole pass gives them, once the other tokens' K/V is in place (batch-invariant mode, so the
//   smaller batch takes the same kernels).
#include <vector>

#include "share_test_util.h"

namespace agentkv {
namespace {

using testing::add_range;
using testing::block_run;
using testing::blocks_for;
using testing::invariant_batch;
using testing::real_model;
using testing::same_bits;
using testing::same_kv_bits;

constexpr int kBlockSize = 16;

// One prompt in one run of blocks of a fresh arena.
class ForwardLayersTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    const std::string text =
        "The old lighthouse keeper climbed the stairs every evening, counting the steps aloud, because his "
        "father had told him that a keeper who forgets the count forgets the sea.";
    toks = lm.tokenizer->encode(text, lm.tokenizer->add_bos_default(), false);
    n = int32_t(toks.size());
    table = block_run(0, blocks_for(n, kBlockSize));
  }
  const LoadedModel& lm = real_model(GetParam());
  const Model& m = *lm.model;
  const ModelConfig& c = m.config();
  ThreadPool pool{0};
  std::vector<int32_t> toks;
  int32_t n = 0;
  std::vector<int32_t> table;
};

TEST_P(ForwardLayersTest, SplitPassEqualsOnePass) {
  for (const int64_t tile : {int64_t(-1), int64_t(0)}) {
    Batch b;
    b.n_tile_tokens = tile;
    b.seqs.push_back(SeqBlocks{table.data(), int32_t(table.size())});
    for (int32_t i = 0; i < n; ++i) b.add(toks[i], i, 0, i, i % 5 == 0 || i + 1 == n);
    const size_t n_logits = b.logit_rows.size() * size_t(c.n_vocab);

    KvArena one(c, kBlockSize, int64_t(table.size()));
    std::vector<float> want(n_logits);
    ASSERT_TRUE(m.forward(b, one, want.data(), pool).ok());

    for (const int split : {1, c.n_layer / 2, c.n_layer - 1}) {
      KvArena two(c, kBlockSize, int64_t(table.size()));
      std::vector<float> hidden(size_t(n) * c.n_embd), got(n_logits);
      ASSERT_TRUE(m.forward_layers(b, two, 0, split, hidden.data(), nullptr, pool).ok());
      ASSERT_TRUE(m.forward_layers(b, two, split, c.n_layer, hidden.data(), got.data(), pool).ok());
      EXPECT_TRUE(same_bits(got, want)) << "split at " << split << ", n_tile_tokens " << tile;
      EXPECT_TRUE(same_kv_bits(two, table, 0, one, table, 0, n)) << "split at " << split;
    }
  }
}

TEST_P(ForwardLayersTest, ResumingOnSubsetEqualsWholePass) {
  const int split = 2;

  // Reference: the whole pass with logits for every token.
  Batch all = invariant_batch();
  all.seqs.push_back(SeqBlocks{table.data(), int32_t(table.size())});
  for (int32_t i = 0; i < n; ++i) all.add(toks[i], i, 0, i, true);
  KvArena ref(c, kBlockSize, int64_t(table.size()));
  std::vector<float> ref_logits(size_t(n) * c.n_vocab);
  ASSERT_TRUE(m.forward(all, ref, ref_logits.data(), pool).ok());

  // Every token through layers [0, split); then only every third token (and the last) resumes, in a
  // KV arena that already holds the other tokens' K/V from the reference.
  KvArena kv(c, kBlockSize, int64_t(table.size()));
  ASSERT_TRUE(m.forward(all, kv, ref_logits.data() /* overwritten with the same values */, pool).ok());
  std::vector<float> hidden(size_t(n) * c.n_embd);
  ASSERT_TRUE(m.forward_layers(all, kv, 0, split, hidden.data(), nullptr, pool).ok());
  // Scribble over the resumed tokens' K/V of the later layers, so the test sees them rewritten.
  std::vector<int32_t> picked;
  for (int32_t i = 0; i < n; ++i)
    if (i % 3 == 1 || i + 1 == n) picked.push_back(i);
  for (int32_t i : picked)
    for (int il = split; il < c.n_layer; ++il) {
      const PagedKvLayer l = kv.layer(il);
      std::fill_n(l.k(table[i / kBlockSize], i % kBlockSize), c.kv_dim(), kv_t(0x3c00));
      std::fill_n(l.v(table[i / kBlockSize], i % kBlockSize), c.kv_dim(), kv_t(0x3c00));
    }
  Batch sub = invariant_batch();
  sub.seqs = all.seqs;
  std::vector<float> sub_hidden;
  for (int32_t i : picked) {
    sub.add(toks[i], i, 0, i, true);
    sub_hidden.insert(sub_hidden.end(), hidden.begin() + int64_t(i) * c.n_embd, hidden.begin() + int64_t(i + 1) * c.n_embd);
  }
  std::vector<float> got(picked.size() * size_t(c.n_vocab));
  ASSERT_TRUE(m.forward_layers(sub, kv, split, c.n_layer, sub_hidden.data(), got.data(), pool).ok());
  for (size_t k = 0; k < picked.size(); ++k) {
    const std::vector<float> want(ref_logits.begin() + int64_t(picked[k]) * c.n_vocab,
                                  ref_logits.begin() + int64_t(picked[k] + 1) * c.n_vocab);
    const std::vector<float> have(got.begin() + int64_t(k) * c.n_vocab, got.begin() + int64_t(k + 1) * c.n_vocab);
    EXPECT_TRUE(same_bits(have, want)) << "token " << picked[k];
  }
  EXPECT_TRUE(same_kv_bits(kv, table, 0, ref, table, 0, n));
}

TEST_P(ForwardLayersTest, RejectsBadRanges) {
  KvArena kv(c, kBlockSize, 1);
  Batch b = invariant_batch();
  b.seqs.push_back(SeqBlocks{table.data(), 1});
  add_range(b, {1, 2}, 0, 0, 0, true);
  std::vector<float> hidden(2 * size_t(c.n_embd)), logits(c.n_vocab);
  EXPECT_FALSE(m.forward_layers(b, kv, 2, 2, hidden.data(), logits.data(), pool).ok());
  EXPECT_FALSE(m.forward_layers(b, kv, -1, 2, hidden.data(), logits.data(), pool).ok());
  EXPECT_FALSE(m.forward_layers(b, kv, 0, c.n_layer + 1, hidden.data(), logits.data(), pool).ok());
  EXPECT_FALSE(m.forward_layers(b, kv, 0, c.n_layer, nullptr, logits.data(), pool).ok());
  EXPECT_FALSE(m.forward_layers(b, kv, 0, c.n_layer, hidden.data(), nullptr, pool).ok());
  EXPECT_TRUE(m.forward_layers(b, kv, 0, 1, hidden.data(), nullptr, pool).ok());
}

INSTANTIATE_TEST_SUITE_P(Models, ForwardLayersTest, ::testing::Values("smollm2", "gemma3"));

}  // namespace
}  // namespace agentkv
