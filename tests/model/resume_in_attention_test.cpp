// A request resumed from a compact context inside attention (EngineOptions::resume_in_attention,
// share/master_diff_attention.h), on the real models and in each diff format: three agents share a
// segment through the KV collector, answer, and are compacted to master + diff; each then continues
// from its compact context, once read in attention and once from the dense copy restored from it.
// - With the segment at the master's positions (no re-rotation on either path) the two continuations
//   are the same bit for bit: tokens and every step's top-5 log-probabilities (the diff rows, lossy
//   ones included, are read as overrides exactly as the restore writes them).
// - At other positions the two round differently; both are compared with the exact context, and the
//   fused path is as close to it as the restored copy (mean over agents, within 0.1; measured: closer
//   or level in 5 of 6 model/format cells).
// - The new context stays compact: the segment's blocks are still holes, its diff keeps the earlier
//   diff's rows and records byte for byte (not encoded twice), and it is rebuilt exactly as the
//   context it resumed from.
// - A lossy format in a round is applied when the turn ends, the turn reading its run losslessly.
// - Nothing leaks: releasing every handle gives every block back.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <tuple>

#include "answered_round.h"
#include "engine/engine.h"
#include "engine/segment_collector.h"
#include "model_test_util.h"
#include "share_test_util.h"

namespace agentkv {
namespace {

using testing::real_model;

using Outcome = testing::RequestDone;
using testing::keep;

RequestParams request(std::vector<int32_t> prompt, int max_tokens, uint64_t kv_from = 0, bool retain = true) {
  return testing::retained_request(std::move(prompt), max_tokens, kv_from, retain);
}

class ResumeInAttentionTest : public ::testing::TestWithParam<std::tuple<std::string, DiffFormat>> {
 protected:
  // The round's answers compacted to master + diff, on an engine that resumes them in attention
  // (answer_shared_round's same_positions: the segment at the master's positions).
  void build(bool same_positions, bool keep_master = false) {
    const LoadedModel& lm = real_model(std::get<0>(GetParam()));
    EngineOptions eo;
    eo.kv.mem_bytes = int64_t(256) << 20;
    eo.kv.block_size = 16;
    eo.diff_format = std::get<1>(GetParam());
    eo.resume_in_attention = true;
    testing::AnsweredRound round;
    ASSERT_NO_FATAL_FAILURE(testing::answer_shared_round(lm, eo, pool_, round, same_positions));
    engine = std::move(round.engine);
    for (size_t i = 0; i < round.answers.size(); ++i) {
      ASSERT_TRUE(engine->compact_retained(round.answers[i], int64_t(round.prefix_tokens[i].size()), round.master,
                                           round.master_start));
      contexts.push_back(round.answers[i]);
    }
    if (keep_master) {
      master = round.master;
      master_start = round.master_start;
      segment = round.segment;
    } else {
      engine->release_retained(round.master);  // the compact contexts keep what they need of it
    }
    follow_up = lm.tokenizer->encode("\nAnd after that?", false, false);
  }

  // The context's tokens, then the follow-up question.
  std::vector<int32_t> continued(uint64_t context) const {
    std::vector<int32_t> t = engine->compact_context(context)->kept()->tokens();
    t.insert(t.end(), follow_up.begin(), follow_up.end());
    return t;
  }

  // The round's segment shared once more by `context` (compact), after its own tokens: the collector's
  // copy, compacted in `format` as a round read in attention does; 0 on a failure (reported).
  uint64_t share_again(uint64_t context, DiffFormat format) {
    RecomputeOptions ro;
    ro.ratio = 0.2;
    const uint64_t prefixes[] = {context};
    auto copies = collect_shared_segment(*engine, master, master_start, segment, prefixes, ro);
    EXPECT_TRUE(copies.ok()) << copies.error();
    if (!copies.ok()) return 0;
    const uint64_t copy = (*copies)[0].handle;
    const int64_t seg_begin = engine->compact_context(context)->n_tokens();
    EXPECT_TRUE(engine->compact_retained(copy, seg_begin, master, master_start, 0, format));
    return copy;
  }
  // A turn from `copy` (read in attention): its new context, compact; 0 on a failure (reported).
  uint64_t answer(uint64_t copy) {
    Outcome next;
    EXPECT_TRUE(engine->add_request(request(continued(copy), 6, copy), keep(&next)).ok());
    EXPECT_TRUE(engine->run_until_idle().ok());
    EXPECT_TRUE(next.error.empty()) << next.error;
    EXPECT_TRUE(engine->is_compact(next.retained));
    return next.error.empty() ? next.retained : 0;
  }

  ThreadPool pool_{2};
  std::unique_ptr<Engine> engine;
  std::vector<int32_t> follow_up;
  std::vector<uint64_t> contexts;  // compact
  uint64_t master = 0;             // build(…, keep_master): the round's master, its segment
  int32_t master_start = 0;
  std::vector<int32_t> segment;
};

// With the segment at the master's positions neither path re-rotates, so reading the master and the
// diff rows in attention must give the restored copy's numbers exactly: the same tokens and log-probs.
TEST_P(ResumeInAttentionTest, AtTheMastersPositionsContinuesExactlyAsTheRestoredCopy) {
  ASSERT_NO_FATAL_FAILURE(build(true));
  Engine& e = *engine;
  int64_t rows = 0;
  for (uint64_t c : contexts) {
    ASSERT_TRUE(e.is_compact(c));
    for (const auto& d : e.compact_context(c)->diffs()) rows += int64_t(d.second->rows().size());
    const uint64_t dense = e.fork_retained(c);  // restored from master + diff: the dense path
    ASSERT_NE(dense, 0u);
    Outcome fused, restored;
    RequestParams a = request(continued(c), 16, c, false), b = request(continued(c), 16, dense, false);
    a.top_logprobs = b.top_logprobs = 5;
    ASSERT_TRUE(e.add_request(a, keep(&fused)).ok());
    ASSERT_TRUE(e.add_request(b, keep(&restored)).ok());
    ASSERT_TRUE(e.run_until_idle().ok());
    ASSERT_TRUE(fused.error.empty()) << fused.error;
    ASSERT_TRUE(restored.error.empty()) << restored.error;
    EXPECT_EQ(fused.tokens, restored.tokens);
    ASSERT_EQ(fused.logprobs.size(), restored.logprobs.size());
    for (size_t s = 0; s < fused.logprobs.size(); ++s) EXPECT_EQ(fused.logprobs[s].top, restored.logprobs[s].top) << "step " << s;
    e.release_retained(dense);
  }
  EXPECT_GT(rows, 0) << "the agents' diffs hold rows, read as overrides";
}

// At other positions (the usual case) the two paths round differently: fused attention rounds a
// master row's score through the rotated query, the restored copy through the rotated, re-rounded key
// (ops/attention_spans.h bounds each score). Neither is the exact context; both are compared with it
// (its full prefill) on the next token's top-5 log-probabilities, and the fused path must be as close
// to it as the restored copy is, up to 0.1 in the mean over agents.
TEST_P(ResumeInAttentionTest, StaysAsCloseToTheExactContextAsTheRestoredCopy) {
  ASSERT_NO_FATAL_FAILURE(build(false));
  Engine& e = *engine;
  // The largest |log p| difference to the exact context over the exact context's top 5 tokens.
  const auto distance = [](const TokenLogprob& x, const TokenLogprob& exact) {
    double worst = 0;
    for (const auto& [t, lp] : exact.top)
      for (const auto& [u, lq] : x.top)
        if (u == t) worst = std::max(worst, double(std::fabs(lq - lp)));
    return worst;
  };
  double fused_err = 0, restored_err = 0;
  for (uint64_t c : contexts) {
    ASSERT_TRUE(e.is_compact(c));
    const uint64_t dense = e.fork_retained(c);  // restored from master + diff: the dense path
    ASSERT_NE(dense, 0u);
    Outcome fused, restored, exact;
    RequestParams a = request(continued(c), 1, c, false), b = request(continued(c), 1, dense, false),
                  x = request(continued(c), 1, 0, false);
    a.top_logprobs = b.top_logprobs = x.top_logprobs = 5;
    ASSERT_TRUE(e.add_request(a, keep(&fused)).ok());
    ASSERT_TRUE(e.add_request(b, keep(&restored)).ok());
    ASSERT_TRUE(e.add_request(x, keep(&exact)).ok());
    ASSERT_TRUE(e.run_until_idle().ok());
    for (const Outcome* o : {&fused, &restored, &exact}) {
      ASSERT_TRUE(o->error.empty()) << o->error;
      ASSERT_EQ(o->logprobs.size(), 1u);
    }
    const double f = distance(fused.logprobs[0], exact.logprobs[0]), r = distance(restored.logprobs[0], exact.logprobs[0]);
    std::printf("  agent: in attention %.3f, restored %.3f from the exact context\n", f, r);
    fused_err += f / double(contexts.size());
    restored_err += r / double(contexts.size());
    e.release_retained(dense);
  }
  EXPECT_LE(fused_err, restored_err + 0.1);
  std::printf("%s/%s: mean largest top-5 log-probability difference to the exact context: in attention %.3f, restored %.3f\n",
              std::get<0>(GetParam()).c_str(), std::string(diff_format_name(std::get<1>(GetParam()))).c_str(), fused_err,
              restored_err);
}

TEST_P(ResumeInAttentionTest, NewContextStaysCompactWithTheSameDiffRecords) {
  ASSERT_NO_FATAL_FAILURE(build(false));
  Engine& e = *engine;
  const int bs = e.kv().block_size();
  for (size_t i = 0; i < contexts.size(); ++i) {
    const uint64_t c = contexts[i];
    const auto was = e.compact_context(c);
    ASSERT_TRUE(was && !was->diffs().empty());
    Outcome next;
    ASSERT_TRUE(e.add_request(request(continued(c), 6, c), keep(&next)).ok());
    ASSERT_TRUE(e.run_until_idle().ok());
    ASSERT_TRUE(next.error.empty()) << next.error;
    ASSERT_TRUE(e.is_compact(next.retained)) << "agent " << i;
    const auto now = e.compact_context(next.retained);
    ASSERT_EQ(now->diffs().size(), was->diffs().size());
    for (size_t d = 0; d < was->diffs().size(); ++d) {
      const auto& [b0, d0] = was->diffs()[d];
      const auto& [b1, d1] = now->diffs()[d];
      EXPECT_EQ(b0, b1);
      EXPECT_EQ(d0->master(), d1->master());
      ASSERT_EQ(d0->rows(), d1->rows());
      const size_t bytes = size_t(d0->packed_rows()->codec().record_bytes());
      for (size_t j = 0; j < d0->rows().size(); ++j)
        EXPECT_EQ(std::memcmp(d0->row_record(j), d1->row_record(j), bytes), 0) << "agent " << i << " row " << j;
      // The run is still holes: no dense copy of it was made.
      const int64_t n = d1->master()->n_tokens();
      for (int64_t k = b1 / bs; k < (b1 + n) / bs; ++k) EXPECT_EQ(now->kept()->blocks()[size_t(k)], KvSequence::kHole);
    }
    // Rebuilt, the new context equals the one it resumed from wherever both have tokens.
    const uint64_t a = e.fork_retained(c), b = e.fork_retained(next.retained);
    ASSERT_NE(a, 0u);
    ASSERT_NE(b, 0u);
    const KvSequence* x = e.retained(a);
    const KvSequence* y = e.retained(b);
    const int32_t upto = int32_t(x->n_tokens());
    EXPECT_TRUE(testing::same_kv_bits(e.kv().arena(), x->blocks(), 0, e.kv().arena(), y->blocks(), 0, upto))
        << "agent " << i;
    e.release_retained(a);
    e.release_retained(b);
    e.release_retained(next.retained);
  }
  for (uint64_t c : contexts) e.release_retained(c);
  EXPECT_EQ(e.kv().pool().stats().n_used, 0) << "every block came back";
  EXPECT_EQ(e.n_retained(), 0u);
}

// A round read in attention with a lossy format (engine/collective_round.cpp): the collector's copy
// is compacted losslessly, so the turn reads the blend as the collector made it, and the format is
// applied when the turn ends. Here each compact context shares the segment once more, after itself:
// - the copy keeps its earlier (lossy) diff as it is, shared, and its new run in f16;
// - at the turn's end the context is one set of packed rows again, every diff in the format: the earlier
//   diff's records byte for byte (not encoded twice), the new run's records exactly those a direct
//   compaction of the dense context the turn read gives (encoded once, from the rows the turn read);
// - nothing leaks.
TEST_P(ResumeInAttentionTest, ALossyFormatIsAppliedWhenTheTurnEnds) {
  const DiffFormat format = std::get<1>(GetParam());
  if (diff_format_lossless(format)) GTEST_SKIP() << "the turn reads the format itself";
  ASSERT_NO_FATAL_FAILURE(build(false, true));
  Engine& e = *engine;
  const auto same_records = [](const SegmentDiff& x, const SegmentDiff& y) {
    if (x.rows() != y.rows() || x.packed_rows()->codec().format() != y.packed_rows()->codec().format()) return false;
    const size_t bytes = size_t(x.packed_rows()->codec().record_bytes());
    for (size_t j = 0; j < x.rows().size(); ++j)
      if (std::memcmp(x.row_record(j), y.row_record(j), bytes) != 0) return false;
    return true;
  };
  for (size_t i = 0; i < contexts.size(); ++i) {
    const uint64_t c = contexts[i];
    const auto was = e.compact_context(c);
    ASSERT_EQ(was->diffs().size(), 1u);
    const int64_t seg_begin = was->n_tokens();
    const uint64_t copy = share_again(c, DiffFormat::kF16);
    ASSERT_NE(copy, 0u);
    const auto read = e.compact_context(copy);
    ASSERT_TRUE(read);
    ASSERT_EQ(read->diffs().size(), 2u);
    EXPECT_EQ(read->diffs()[0].second, was->diffs()[0].second) << "agent " << i << ": the earlier diff, shared";
    EXPECT_EQ(read->diffs()[1].second->packed_rows()->codec().format(), DiffFormat::kF16);
    EXPECT_EQ(read->packings().size(), 2u);

    Outcome next;
    next.retained = answer(copy);
    ASSERT_NE(next.retained, 0u);
    // The dense context the turn read, compacted directly: the reference for the new run's records.
    const uint64_t dense = e.fork_retained(next.retained);
    ASSERT_NE(dense, 0u);
    ASSERT_TRUE(e.compact_retained(dense, seg_begin, master, master_start));
    ASSERT_TRUE(e.compact_retained(next.retained, seg_begin, master, master_start, copy));
    const auto now = e.compact_context(next.retained);
    const auto direct = e.compact_context(dense);
    ASSERT_EQ(now->diffs().size(), 2u);
    ASSERT_EQ(now->packings().size(), 1u) << "agent " << i << ": one set of packed rows";
    for (const auto& d : now->diffs()) EXPECT_EQ(d.second->packed_rows()->codec().format(), format);
    EXPECT_EQ(now->diffs()[0].first, was->diffs()[0].first);
    EXPECT_TRUE(same_records(*now->diffs()[0].second, *was->diffs()[0].second)) << "agent " << i;
    ASSERT_EQ(direct->diffs().size(), 1u);
    EXPECT_EQ(now->diffs()[1].first, direct->diffs()[0].first);
    EXPECT_TRUE(same_records(*now->diffs()[1].second, *direct->diffs()[0].second)) << "agent " << i;
    EXPECT_GT(now->diffs()[1].second->rows().size(), 0u);
    for (uint64_t h : {copy, dense, next.retained}) e.release_retained(h);
  }
  for (uint64_t c : contexts) e.release_retained(c);
  e.release_retained(master);
  EXPECT_EQ(e.kv().pool().stats().n_used, 0) << "every block came back";
  EXPECT_EQ(e.n_retained(), 0u);
}

// A context whose run stayed lossless (its compaction at the turn's end did not happen, e.g. the pool
// was short) settles at its next compaction in the engine's format: the next round's copy keeps it as
// it is (lossless, beside the lossy first diff), and the compaction at that turn's end encodes both
// lossless runs in the format, one set of packed rows again, the first diff's records unchanged.
TEST_P(ResumeInAttentionTest, ARunLeftLosslessSettlesAtTheNextCompaction) {
  const DiffFormat format = std::get<1>(GetParam());
  if (diff_format_lossless(format)) GTEST_SKIP() << "the turn reads the format itself";
  ASSERT_NO_FATAL_FAILURE(build(false, true));
  Engine& e = *engine;
  const uint64_t c = contexts[0];
  auto first = e.compact_context(c)->diffs()[0];
  const uint64_t copy1 = share_again(c, DiffFormat::kF16);
  ASSERT_NE(copy1, 0u);
  const uint64_t left = answer(copy1);  // not compacted at its turn's end: its second run stays f16
  ASSERT_NE(left, 0u);
  const int64_t seg_begin = e.compact_context(left)->n_tokens();
  const uint64_t copy2 = share_again(left, DiffFormat::kF16);
  ASSERT_NE(copy2, 0u);
  auto read = e.compact_context(copy2);
  ASSERT_EQ(read->diffs().size(), 3u);
  EXPECT_EQ(read->diffs()[0].second, first.second);
  EXPECT_EQ(read->diffs()[1].second->packed_rows()->codec().format(), DiffFormat::kF16);
  EXPECT_EQ(read->diffs()[2].second->packed_rows()->codec().format(), DiffFormat::kF16);
  const uint64_t next = answer(copy2);
  ASSERT_NE(next, 0u);
  const uint64_t dense = e.fork_retained(next);  // what the turn read, for the rebuilt context below
  ASSERT_NE(dense, 0u);
  ASSERT_TRUE(e.compact_retained(next, seg_begin, master, master_start, copy2));
  auto now = e.compact_context(next);
  ASSERT_EQ(now->diffs().size(), 3u);
  EXPECT_EQ(now->packings().size(), 1u);
  for (const auto& d : now->diffs()) EXPECT_EQ(d.second->packed_rows()->codec().format(), format);
  EXPECT_EQ(now->diffs()[0].second->rows(), first.second->rows());
  // Rebuilt, it equals what the turn read outside the two settled runs, and within the format's bound
  // inside them (asserted by master_diff_test; here: every slot rebuilt, the same tokens).
  const uint64_t rebuilt = e.fork_retained(next);
  ASSERT_NE(rebuilt, 0u);
  const KvSequence* x = e.retained(dense);
  const KvSequence* y = e.retained(rebuilt);
  ASSERT_EQ(x->tokens(), y->tokens());
  const int32_t upto = int32_t(now->diffs()[1].first);
  EXPECT_TRUE(testing::same_kv_bits(e.kv().arena(), x->blocks(), 0, e.kv().arena(), y->blocks(), 0, upto));
  for (uint64_t h : {copy1, left, copy2, next, dense, rebuilt}) e.release_retained(h);
  for (uint64_t h : contexts) e.release_retained(h);
  first = {};  // the test's own references last
  read.reset();
  now.reset();
  e.release_retained(master);
  EXPECT_EQ(e.kv().pool().stats().n_used, 0) << "every block came back";
  EXPECT_EQ(e.n_retained(), 0u);
}

INSTANTIATE_TEST_SUITE_P(BothModelsEveryFormat, ResumeInAttentionTest, testing::both_models_every_format(),
                         testing::model_format_name);

}  // namespace
}  // namespace agentkv
