// Master–diff storage of retained contexts in the engine (Engine::compact_retained,
// engine/compact_context.h), on the real models: agents share a segment through the KV collector,
// answer, and are compacted to master + diff, in each diff format (EngineOptions::diff_format). A
// context rebuilt from the compact form equals the dense one bit for bit at every layer (with a lossy
// format: everywhere outside the segment's diff rows, which share/master_diff's test bounds);
// compacting frees blocks; and releasing the agents in any order frees the master and the
// compressed diffs exactly when the last user goes.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <tuple>

#include "engine/engine.h"
#include "engine/segment_collector.h"
#include "model_test_util.h"
#include "share_test_util.h"

namespace agentkv {
namespace {

using testing::real_model;

struct Done {
  uint64_t retained = 0;
  std::string error;
};

RequestCallback keep(Done* d) {
  return [d](const RequestEvent& ev) {
    if (!ev.error.empty()) d->error = ev.error;
    if (ev.request_finished) d->retained = ev.retained_kv;
  };
}

RequestParams retained_request(std::vector<int32_t> prompt, int max_tokens, uint64_t kv_from = 0) {
  RequestParams p;
  p.prompt = std::move(prompt);
  p.max_tokens = max_tokens;
  p.retain_kv = true;
  p.kv_from = kv_from;
  return p;
}

class CompactContextTest : public ::testing::TestWithParam<std::tuple<std::string, DiffFormat>> {};

TEST_P(CompactContextTest, RebuiltContextIsBitIdenticalAndMastersLiveUntilTheLastDiff) {
  const auto [model, format] = GetParam();
  const LoadedModel& lm = real_model(model);
  const Tokenizer& tok = *lm.tokenizer;
  ThreadPool pool(2);
  EngineOptions eo;
  eo.kv.mem_bytes = int64_t(256) << 20;
  eo.kv.block_size = 16;
  eo.diff_format = format;
  auto created = Engine::create(lm, eo, pool);
  ASSERT_TRUE(created.ok()) << created.error();
  Engine& e = **created;

  const std::vector<std::string> prefixes = {
      "Ada is a baker who wakes at four and knows every rumour in town.\n",
      "Bram, the blacksmith, has not spoken to his brother in ten years, and he still keeps the old forge key.\n",
      "Cleo teaches the children.\n"};
  const std::vector<int32_t> segment = tok.encode(
      "Town crier: the bridge over the river fell in last night's storm, and the market is cut off until it is "
      "rebuilt. Volunteers are asked to gather at the mill at noon with rope and timber.\n",
      false, false);
  const std::vector<int32_t> own = tok.encode("What do you do next?", false, false);

  std::vector<Done> pre(prefixes.size()), master(1);
  std::vector<std::vector<int32_t>> prefix_tokens;
  for (size_t i = 0; i < prefixes.size(); ++i) {
    prefix_tokens.push_back(tok.encode(prefixes[i], tok.add_bos_default(), false));
    ASSERT_TRUE(e.add_request(retained_request(prefix_tokens[i], 0), keep(&pre[i])).ok());
  }
  std::vector<int32_t> master_tokens;
  if (tok.add_bos_default()) master_tokens.push_back(tok.bos_id());
  const int32_t master_start = int32_t(master_tokens.size());
  master_tokens.insert(master_tokens.end(), segment.begin(), segment.end());
  ASSERT_TRUE(e.add_request(retained_request(master_tokens, 0), keep(&master[0])).ok());
  ASSERT_TRUE(e.run_until_idle().ok());

  std::vector<uint64_t> handles;
  for (const Done& d : pre) handles.push_back(d.retained);
  RecomputeOptions ro;
  ro.ratio = 0.2;
  auto copies = collect_shared_segment(e, master[0].retained, master_start, segment, handles, ro);
  ASSERT_TRUE(copies.ok()) << copies.error();
  for (uint64_t h : handles) e.release_retained(h);

  // Each agent answers from its blended copy; its final context is what gets compacted.
  std::vector<Done> answers(prefixes.size());
  for (size_t i = 0; i < prefixes.size(); ++i) {
    std::vector<int32_t> prompt = prefix_tokens[i];
    prompt.insert(prompt.end(), segment.begin(), segment.end());
    prompt.insert(prompt.end(), own.begin(), own.end());
    ASSERT_TRUE(e.add_request(retained_request(prompt, 12, (*copies)[i].handle), keep(&answers[i])).ok());
  }
  ASSERT_TRUE(e.run_until_idle().ok());
  for (size_t i = 0; i < prefixes.size(); ++i) {
    ASSERT_TRUE(answers[i].error.empty()) << answers[i].error;
    e.release_retained((*copies)[i].handle);
  }

  // A dense reference of every final context (forks share the blocks, so they stay as written).
  std::vector<uint64_t> dense_ref;
  for (const Done& d : answers) dense_ref.push_back(e.fork_retained(d.retained));
  const int64_t used_dense = e.kv().pool().stats().n_used;
  for (size_t i = 0; i < prefixes.size(); ++i) {
    const int32_t p = int32_t(prefix_tokens[i].size());
    ASSERT_TRUE(e.compact_retained(answers[i].retained, p, master[0].retained, master_start));
    EXPECT_TRUE(e.is_compact(answers[i].retained));
    EXPECT_EQ(e.retained(answers[i].retained), nullptr);
  }
  // A mismatched segment is refused and changes nothing.
  EXPECT_FALSE(e.compact_retained(dense_ref[0], 1, master[0].retained, master_start));

  for (size_t i = 0; i < prefixes.size(); ++i) {
    const uint64_t rebuilt = e.fork_retained(answers[i].retained);
    ASSERT_NE(rebuilt, 0u);
    const KvSequence* a = e.retained(dense_ref[i]);
    const KvSequence* b = e.retained(rebuilt);
    ASSERT_EQ(a->tokens(), b->tokens());
    if (diff_format_lossless(format)) {
      EXPECT_TRUE(testing::same_kv_bits(e.kv().arena(), a->blocks(), 0, e.kv().arena(), b->blocks(), 0,
                                        int32_t(a->n_tokens())))
          << "agent " << i;
    } else {
      // Outside the segment nothing is approximated: its prefix before, its own turn after.
      const int32_t p = int32_t(prefix_tokens[i].size()), end = p + int32_t(segment.size());
      EXPECT_TRUE(testing::same_kv_bits(e.kv().arena(), a->blocks(), 0, e.kv().arena(), b->blocks(), 0, p));
      EXPECT_TRUE(testing::same_kv_bits(e.kv().arena(), a->blocks(), end, e.kv().arena(), b->blocks(), end,
                                        int32_t(a->n_tokens()) - end));
    }
    e.release_retained(rebuilt);
  }
  // Without the dense references, the compact forms hold fewer blocks than the dense contexts did.
  for (uint64_t h : dense_ref) e.release_retained(h);
  const std::vector<int32_t> master_block_ids = e.retained(master[0].retained)->blocks();
  e.release_retained(master[0].retained);
  const int64_t used_compact = e.kv().pool().stats().n_used;
  EXPECT_LT(used_compact, used_dense);

  // Release the agents in a shuffled order: the master's blocks stay until the last one goes.
  std::vector<size_t> order{0, 1, 2};
  std::shuffle(order.begin(), order.end(), std::mt19937(7));
  for (size_t k = 0; k < order.size(); ++k) {
    e.release_retained(answers[order[k]].retained);
    for (int32_t b : master_block_ids) EXPECT_EQ(e.kv().pool().refcount(b) > 0, k + 1 < order.size()) << "after " << k + 1;
  }
  EXPECT_EQ(e.kv().pool().stats().n_used, 0);
  EXPECT_EQ(e.n_retained(), 0u);
}

INSTANTIATE_TEST_SUITE_P(BothModelsEveryFormat, CompactContextTest,
                         ::testing::Combine(::testing::Values("smollm2", "gemma3"),
                                            ::testing::Values(DiffFormat::kF16, DiffFormat::kInt8, DiffFormat::kInt4)),
                         [](const auto& info) {
                           return std::get<0>(info.param) + "_" + std::string(diff_format_name(std::get<1>(info.param)));
                         });

}  // namespace
}  // namespace agentkv
