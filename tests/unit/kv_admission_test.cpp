// Admission before work (engine/kv_admission.h) with no model: the worst case of a request in blocks,
// the pinned blocks counted from reference counts (a snapshot's references, not a running sequence's
// or the segment cache's), and the one fit check's two codes (never fits / fits once pins go).
#include "engine/kv_admission.h"

#include "kv/kv_manager.h"
#include "tiny_kv_config.h"

#include <gtest/gtest.h>

#include <numeric>
#include <vector>

namespace agentkv {
namespace {

using testing_kv::iota_tokens;
using testing_kv::kBlock;
using testing_kv::make_manager;

TEST(KvAdmission, WorstCaseBlocks) {
  // 10 prompt + 6 generated = 16 tokens: 4 blocks of 4.
  EXPECT_EQ(worst_case_blocks(10, 6, 1, 1024, kBlock), 4);
  EXPECT_EQ(worst_case_blocks(10, 7, 1, 1024, kBlock), 5);
  // The context caps the generated tokens: 10 + min(100, 20 - 10) = 20 tokens.
  EXPECT_EQ(worst_case_blocks(10, 100, 1, 20, kBlock), 5);
  // max_tokens 0 (a prefill): the prompt's blocks.
  EXPECT_EQ(worst_case_blocks(9, 0, 1, 1024, kBlock), 3);
  // n = 3: two more samples, each its 6 generated tokens (2 blocks) plus a copied partial block.
  EXPECT_EQ(worst_case_blocks(10, 6, 3, 1024, kBlock), 4 + 2 * (2 + 1));
}

TEST(KvAdmission, FitsTheUnpinnedKv) {
  const KvBudget b{100, 60, kBlock};
  EXPECT_TRUE(check_kv_fit(KvDemand{40, 0, 160}, b, "the request").ok());
  // Blocks it shares with its resident context are pinned already and cost nothing more.
  EXPECT_TRUE(check_kv_fit(KvDemand{50, 10, 200}, b, "the request").ok());
}

TEST(KvAdmission, OverTheUnpinnedKvIsPinnedWithTheCounts) {
  const KvBudget b{100, 60, kBlock};
  const Status st = check_kv_fit(KvDemand{41, 0, 164}, b, "the request");
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), ErrorCode::kKvPinned);  // 41 <= 100: it fits once pins are released
  EXPECT_NE(st.error().find("the request needs up to 41 KV blocks (164 tokens"), std::string::npos) << st.error();
  EXPECT_NE(st.error().find("only 40 of the 100 blocks"), std::string::npos) << st.error();
  EXPECT_NE(st.error().find("60 held by retained agent contexts"), std::string::npos) << st.error();
}

TEST(KvAdmission, OverTheWholeBudgetNeverFits) {
  const Status none_pinned = check_kv_fit(KvDemand{101, 0, 404}, KvBudget{100, 0, kBlock}, "the request");
  ASSERT_FALSE(none_pinned.ok());
  EXPECT_EQ(none_pinned.code(), ErrorCode::kResourceExhausted);
  EXPECT_NE(none_pinned.error().find("never fit"), std::string::npos) << none_pinned.error();
  const Status pinned = check_kv_fit(KvDemand{101, 0, 404}, KvBudget{100, 50, kBlock}, "the round of 3 agents");
  ASSERT_FALSE(pinned.ok());
  EXPECT_EQ(pinned.code(), ErrorCode::kResourceExhausted);
  EXPECT_EQ(pinned.error().rfind("the round of 3 agents needs up to 101", 0), 0u) << pinned.error();
}

TEST(KvAdmission, PinnedBlocksAreReferencesBeyondTheUnpinnedOnes) {
  auto m = make_manager(16);
  // A "snapshot" of 3 blocks and a "running" sequence forked from it that adds a block of its own.
  KvSequence snapshot(*m);
  ASSERT_TRUE(snapshot.reserve(12));
  snapshot.commit(iota_tokens(12));
  KvSequence running = snapshot.fork();
  ASSERT_TRUE(running.reserve(4));
  running.commit(iota_tokens(4, 500));
  ASSERT_EQ(m->pool().num_free(), 12);
  std::vector<int32_t> refs(16, 0);
  // Nothing counted as unpinned: every used block is pinned.
  EXPECT_EQ(count_pinned_blocks(m->pool(), refs), 4);
  // The running sequence's references: its own block is unpinned, the shared three stay pinned.
  for (int32_t b : running.blocks()) ++refs[size_t(b)];
  EXPECT_EQ(count_pinned_blocks(m->pool(), refs), 3);
  // Released, the snapshot pins nothing: only the running sequence holds the blocks.
  snapshot.release();
  EXPECT_EQ(count_pinned_blocks(m->pool(), refs), 0);
}

}  // namespace
}  // namespace agentkv
