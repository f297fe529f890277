// parse_hybrid_modes: the mode specs transfer-quality and transfer-retrieval share, and the native
// work share a transfer report stands for.
#include <gtest/gtest.h>

#include "lab/transfer/hybrid_modes.h"

namespace agentkv {
namespace {

TEST(TransferHybridModes, ParsesEachForm) {
  auto m = parse_hybrid_modes("--hybrid", "32,last:8,dev:0.15,dev:0.1+last:16,,", 2);
  ASSERT_TRUE(m.ok()) << m.error();
  ASSERT_EQ(m->size(), 4u);
  EXPECT_EQ((*m)[0].label, "32");
  EXPECT_EQ((*m)[0].options.native_suffix, 32);
  EXPECT_EQ((*m)[0].options.check_layer, -1);
  EXPECT_EQ((*m)[1].options.native_suffix, 8);
  EXPECT_EQ((*m)[2].options.check_layer, 2);
  EXPECT_DOUBLE_EQ((*m)[2].options.recompute_ratio, 0.15);
  EXPECT_EQ((*m)[2].options.native_suffix, 0);
  EXPECT_EQ((*m)[3].options.check_layer, 2);
  EXPECT_DOUBLE_EQ((*m)[3].options.recompute_ratio, 0.1);
  EXPECT_EQ((*m)[3].options.native_suffix, 16);
  EXPECT_TRUE(parse_hybrid_modes("--hybrid", "", 1)->empty());
}

// last:P%: the suffix as a share of the context (KvTransferOptions::native_suffix_share).
TEST(TransferHybridModes, ParsesTheSuffixAsAShareOfTheContext) {
  auto m = parse_hybrid_modes("--hybrid", "last:12.5%,last:100%,last:0%,dev:0.1+last:10%,last:128+last:12.5%", 1);
  ASSERT_TRUE(m.ok()) << m.error();
  ASSERT_EQ(m->size(), 5u);
  EXPECT_EQ((*m)[0].label, "last:12.5%");
  EXPECT_DOUBLE_EQ((*m)[0].options.native_suffix_share, 0.125);
  EXPECT_EQ((*m)[0].options.native_suffix, 0);
  EXPECT_DOUBLE_EQ((*m)[1].options.native_suffix_share, 1.0);
  EXPECT_DOUBLE_EQ((*m)[2].options.native_suffix_share, 0.0);
  EXPECT_DOUBLE_EQ((*m)[3].options.recompute_ratio, 0.1);
  EXPECT_DOUBLE_EQ((*m)[3].options.native_suffix_share, 0.1);
  EXPECT_EQ((*m)[4].options.native_suffix, 128);  // at least 128 tokens, at least 12.5%
  EXPECT_DOUBLE_EQ((*m)[4].options.native_suffix_share, 0.125);
  for (const char* bad : {"last:%", "last:101%", "last:-1%", "last:x%", "last:5%%"}) {
    auto b = parse_hybrid_modes("--hybrid", bad, 1);
    ASSERT_FALSE(b.ok()) << bad;
    EXPECT_NE(b.error().find("last:P%"), std::string::npos) << b.error();
  }
}

// first:K: the receiver computes the context's first K tokens itself (KvTransferOptions::native_prefix;
// 1 unless named).
TEST(TransferHybridModes, ParsesANativePrefix) {
  auto m = parse_hybrid_modes("--hybrid", "first:64+last:10%,last:8", 1);
  ASSERT_TRUE(m.ok()) << m.error();
  ASSERT_EQ(m->size(), 2u);
  EXPECT_EQ((*m)[0].options.native_prefix, 64);
  EXPECT_DOUBLE_EQ((*m)[0].options.native_suffix_share, 0.1);
  EXPECT_EQ((*m)[1].options.native_prefix, 1);
  for (const char* bad : {"first:", "first:-1", "first:2x"}) {
    auto b = parse_hybrid_modes("--hybrid", bad, 1);
    ASSERT_FALSE(b.ok()) << bad;
    EXPECT_NE(b.error().find("first:K"), std::string::npos) << b.error();
  }
}

// rare:R / rare:P%: the share of the context's tokens least seen in the map's fitting text, each with
// around:B:A neighbours before and after (default 4:1; around:W, W either side); the counts come from the map or --rare-corpus, and a rare mode
// without any is refused by name.
TEST(TransferHybridModes, ParsesTheHybridByRarity) {
  auto m = parse_hybrid_modes("--hybrid", "rare:2%+last:15%,rare:0.01+around:8+last:32,rare:1%+around:0,rare:1%+around:4:1", 1);
  ASSERT_TRUE(m.ok()) << m.error();
  ASSERT_EQ(m->size(), 4u);
  EXPECT_EQ((*m)[3].options.rare_window, 4);  // before
  EXPECT_EQ((*m)[3].options.rare_window_after, 1);
  m->pop_back();
  EXPECT_DOUBLE_EQ((*m)[0].options.rare_share, 0.02);
  EXPECT_EQ((*m)[0].options.rare_window, 4);
  EXPECT_EQ((*m)[0].options.rare_window_after, 1);  // the default: 4 before, 1 after
  EXPECT_DOUBLE_EQ((*m)[0].options.native_suffix_share, 0.15);
  EXPECT_EQ((*m)[0].options.check_layer, -1);  // no check pass: the counts choose, not a deviation
  EXPECT_DOUBLE_EQ((*m)[1].options.rare_share, 0.01);
  EXPECT_EQ((*m)[1].options.rare_window, 8);
  EXPECT_EQ((*m)[1].options.rare_window_after, 8);
  EXPECT_EQ((*m)[1].options.native_suffix, 32);
  EXPECT_EQ((*m)[2].options.rare_window, 0);
  EXPECT_EQ((*m)[0].options.rare_max_tokens, 0);  // no cap unless asked
  // rare:R:N: at most N rare tokens, however long the context.
  auto capped = parse_hybrid_modes("--hybrid", "rare:2%:24+last:10%,rare:0.5:1", 1);
  ASSERT_TRUE(capped.ok()) << capped.error();
  EXPECT_DOUBLE_EQ((*capped)[0].options.rare_share, 0.02);
  EXPECT_EQ((*capped)[0].options.rare_max_tokens, 24);
  EXPECT_EQ((*capped)[1].options.rare_max_tokens, 1);
  for (const char* bad : {"rare:", "rare:101%", "rare:1.5", "rare:-0.1", "rare:x", "around:", "around:-1", "around:9999",
                          "around:4:", "around::1", "around:4:x", "around:4:-1", "rare:2%:", "rare:2%:0", "rare:2%:x",
                          "rare:2%:-3", "rare::24"}) {
    auto b = parse_hybrid_modes("--hybrid", bad, 1);
    ASSERT_FALSE(b.ok()) << bad;
    EXPECT_NE(b.error().find(bad), std::string::npos) << b.error();
  }

  std::vector<HybridMode> modes = *m;
  modes.push_back(HybridMode{"last:8", {}});
  auto none = attach_rare_counts(modes, {});
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.error().find("rare:2%+last:15%"), std::string::npos) << none.error();
  EXPECT_NE(none.error().find("--rare-corpus"), std::string::npos) << none.error();
  const std::vector<uint32_t> counts{3, 0, 7};
  ASSERT_TRUE(attach_rare_counts(modes, counts).ok());
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(modes[i].options.rare_counts.data(), counts.data());
  EXPECT_TRUE(modes[3].options.rare_counts.empty());  // not a rare mode: untouched
}

// The tokens the rarity hybrid recomputes: the rarest first (ties to the later token where neither has
// more equally rare neighbours), each widened by the window, merged into disjoint ascending runs, never
// past either end.
TEST(TransferHybridModes, RareRunsTakeTheRarestTokensAndTheirNeighbours) {
  //                                 0  1  2  3  4  5  6  7  8  9
  const std::vector<int32_t> tokens{0, 1, 2, 1, 0, 3, 3, 0, 2, 4};
  const std::vector<uint32_t> counts{9, 5, 0, 1, 7};  // token 2 rarest, then 3, then 1
  using Runs = std::vector<std::pair<int64_t, int64_t>>;
  EXPECT_EQ(rare_runs(tokens, counts, 0, 4, 4), Runs{});
  EXPECT_EQ(rare_runs(tokens, counts, 1, 0, 0), (Runs{{8, 9}}));          // the later of the two 2s
  EXPECT_EQ(rare_runs(tokens, counts, 2, 0, 0), (Runs{{2, 3}, {8, 9}}));
  EXPECT_EQ(rare_runs(tokens, counts, 3, 0, 0), (Runs{{2, 3}, {6, 7}, {8, 9}}));
  EXPECT_EQ(rare_runs(tokens, counts, 4, 0, 0), (Runs{{2, 3}, {5, 7}, {8, 9}}));
  EXPECT_EQ(rare_runs(tokens, counts, 2, 1, 1), (Runs{{1, 4}, {7, 10}}));  // widened, clipped at the end
  EXPECT_EQ(rare_runs(tokens, counts, 2, 3, 3), (Runs{{0, 10}}));          // overlapping windows merge
  EXPECT_EQ(rare_runs(tokens, counts, 100, 0, 0), (Runs{{0, 10}}));        // more than there are: all
  EXPECT_EQ(rare_runs(tokens, counts, 2, 2, 0), (Runs{{0, 3}, {6, 9}}));    // before only
  EXPECT_EQ(rare_runs(tokens, counts, 2, 0, 1), (Runs{{2, 4}, {8, 10}}));   // after only
}

// Equally rare tokens: a run of them (a number, a name in pieces) goes before a lone later one.
TEST(TransferHybridModes, RareRunsPreferRunsOfEquallyRareTokens) {
  //                                 0  1  2  3  4  5  6  7
  const std::vector<int32_t> tokens{0, 1, 2, 2, 2, 2, 3, 2};
  const std::vector<uint32_t> counts{0, 0, 9, 0};  // 0, 1 and 3 unseen; 0 and 1 side by side
  using Runs = std::vector<std::pair<int64_t, int64_t>>;
  EXPECT_EQ(rare_runs(tokens, counts, 1, 0, 0), (Runs{{1, 2}}));  // in the run, the later
  EXPECT_EQ(rare_runs(tokens, counts, 2, 0, 0), (Runs{{0, 2}}));  // the run, not the lone 3 at 6
  EXPECT_EQ(rare_runs(tokens, counts, 3, 0, 0), (Runs{{0, 2}, {6, 7}}));
}

// The rarity budget: ceil(share × context tokens), at most the cap when one is set.
TEST(TransferHybridModes, RareBudgetIsAShareOfTheContextUpToTheCap) {
  EXPECT_EQ(rare_budget(0.0, 0, 1000), 0);
  EXPECT_EQ(rare_budget(0.02, 0, 1000), 20);
  EXPECT_EQ(rare_budget(0.02, 0, 1001), 21);  // ceil
  EXPECT_EQ(rare_budget(0.02, 0, 4000), 80);
  EXPECT_EQ(rare_budget(0.02, 24, 1000), 20);  // under the cap
  EXPECT_EQ(rare_budget(0.02, 24, 4000), 24);  // capped
  EXPECT_EQ(rare_budget(0.0, 24, 4000), 0);    // no share, no rare tokens
  EXPECT_EQ(rare_budget(1.0, 0, 37), 37);
}

TEST(TransferHybridModes, RefusesBadSpecsNamingThem) {
  for (const char* bad : {"dev:1.5", "dev:", "last:-3", "last:x", "mid:3", "dev:0.1+", "7q"}) {
    auto m = parse_hybrid_modes("--hybrid", bad, 1);
    ASSERT_FALSE(m.ok()) << bad;
    EXPECT_NE(m.error().find("--hybrid"), std::string::npos) << m.error();
  }
}

TEST(TransferHybridModes, NativeWorkShare) {
  KvTransferReport rep;
  rep.n_receiver_tokens = 100;
  rep.n_native = 1;        // BOS
  rep.n_projected = 99;
  EXPECT_DOUBLE_EQ(native_work_share(rep, 10), 0.01);
  rep.n_recomputed = 9;    // through every layer
  rep.check_layers = 2;    // all 99 projected tokens through layers 0..1
  EXPECT_DOUBLE_EQ(native_work_share(rep, 10), (10.0 * 10 + 90.0 * 2) / 1000.0);
  rep.n_native = 100;
  rep.n_projected = rep.n_recomputed = rep.check_layers = 0;
  EXPECT_DOUBLE_EQ(native_work_share(rep, 10), 1.0);
}

}  // namespace
}  // namespace agentkv
