// KV-PRM against the text PRM on SmolLM2, and the policy's cache left untouched by scoring.
//
// Bound: zero (bit-identical log-odds). Both paths write every K/V and run every verify token with
// the prefill kernels in batch-invariant mode (kv/direct_prefill.h), where a token's numerics do
// not depend on the other tokens of its pass, the chunking, or where its blocks lie; attention reads
// the same f16 K/V values in the same slot order. The only difference between the paths is which
// forward pass computed the prefix, which that mode makes irrelevant.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "model_test_util.h"
#include "kv/direct_prefill.h"
#include "lab/prm/arith_prompt.h"
#include "prm/kv_scorer.h"
#include "lab/prm/trajectory.h"

namespace agentkv::prm {
namespace {

std::unique_ptr<KvManager> scorer_manager(const LoadedModel& lm, bool prefix_caching) {
  KvManagerOptions o;
  o.mem_bytes = int64_t(256) << 20;
  o.prefix_caching = prefix_caching;
  auto kv = KvManager::create(lm.config(), lm.fingerprint, o);
  EXPECT_TRUE(kv.ok()) << kv.error();
  return std::move(*kv);
}

constexpr uint64_t kProblems = 3;

// The committed trajectories: reference solutions of held-out problems 0..2 and, for each, a copy
// whose second step states a wrong result (and carries it on), so both labels are present.
std::vector<std::string> solutions(const ArithProblem& p) {
  std::string wrong;
  for (size_t i = 0; i < p.reference.size(); ++i) {
    ArithStep s = p.reference[i];
    if (i == 1) s.result += 3;
    if (i > 1 && p.reference[i - 1].result == s.lhs) s.lhs += 3;
    wrong += "Step " + std::to_string(i + 1) + ": " + std::to_string(s.lhs) + " " + s.op + " " +
             std::to_string(s.rhs) + " = " + std::to_string(s.result) + "\n";
  }
  return {format_solution(p), wrong};
}

struct Fixture {
  const LoadedModel& lm = testing::real_model("smollm2");
  ThreadPool pool{0};
  std::unique_ptr<KvManager> kv = scorer_manager(lm, true);
  std::unique_ptr<KvManager> scratch = scorer_manager(lm, false);
  VerifyHead head;
  std::vector<KvSequence> prompts;                     // one per problem
  std::vector<std::vector<int32_t>> prompt_tokens;
  std::vector<std::vector<std::vector<int32_t>>> lines;  // per trajectory
  std::vector<size_t> prompt_of;                       // per trajectory
  std::vector<std::vector<KvSequence>> contexts;       // per trajectory, per line

  Fixture() {
    auto h = make_verify_head(*lm.tokenizer);
    EXPECT_TRUE(h.ok()) << h.error();
    head = *h;
    prompts.reserve(kProblems);
    for (uint64_t i = 0; i < kProblems; ++i) {
      const ArithProblem p = generate_arith_problem(arith_seed(ArithSplit::kHeldOut, i));
      auto text = arith_policy_prompt(*lm.tokenizer, p);
      EXPECT_TRUE(text.ok());
      prompt_tokens.push_back(lm.tokenizer->encode(*text, lm.tokenizer->add_bos_default(), true));
      prompts.emplace_back(*kv);
      EXPECT_TRUE(prefill_sequence(*lm.model, *kv, prompts.back(), prompt_tokens.back(), pool).ok());
      for (const std::string& s : solutions(p)) {
        lines.push_back(encode_lines(*lm.tokenizer, s));
        prompt_of.push_back(prompts.size() - 1);
      }
    }
    std::vector<const KvSequence*> starts;
    std::vector<std::span<const std::vector<int32_t>>> trajs;
    for (size_t t = 0; t < lines.size(); ++t) {
      starts.push_back(&prompts[prompt_of[t]]);
      trajs.push_back(lines[t]);
    }
    auto ctx = line_contexts(*lm.model, *kv, starts, trajs, pool);
    EXPECT_TRUE(ctx.ok()) << ctx.error();
    contexts = std::move(*ctx);
  }
  // What the text PRM re-encodes for each context of all_contexts(), in the same order.
  std::vector<std::vector<int32_t>> all_texts() const {
    std::vector<std::vector<int32_t>> out;
    for (size_t t = 0; t < lines.size(); ++t)
      for (size_t k = 0; k < lines[t].size(); ++k) out.push_back(concat_prefix(prompt_tokens[prompt_of[t]], lines[t], k + 1));
    return out;
  }
  std::vector<const KvSequence*> all_contexts() const {
    std::vector<const KvSequence*> out;
    for (auto& t : contexts)
      for (auto& c : t) out.push_back(&c);
    return out;
  }
};

TEST(KvPrmScorer, KvScoreEqualsTextPrmScoreBitForBit) {
  Fixture f;
  const std::vector<const KvSequence*> ctx = f.all_contexts();
  auto kv_scores = kv_prm_score(*f.lm.model, *f.kv, ctx, f.head, f.pool);  // one forward for all
  ASSERT_TRUE(kv_scores.ok()) << kv_scores.error();
  const std::vector<std::vector<int32_t>> texts = f.all_texts();
  auto text_scores = text_prm_score(*f.lm.model, *f.scratch, texts, f.head, f.pool);
  ASSERT_TRUE(text_scores.ok()) << text_scores.error();
  ASSERT_EQ(kv_scores->logodds.size(), ctx.size());
  ASSERT_EQ(text_scores->logodds.size(), ctx.size());
  float worst = 0;
  for (size_t i = 0; i < ctx.size(); ++i) {
    worst = std::max(worst, std::fabs(kv_scores->logodds[i] - text_scores->logodds[i]));
    EXPECT_EQ(0, std::memcmp(&kv_scores->logodds[i], &text_scores->logodds[i], sizeof(float)))
        << "candidate " << i << ": kv " << kv_scores->logodds[i] << " text " << text_scores->logodds[i];
    EXPECT_EQ(kv_scores->score[i], text_scores->score[i]);
  }
  RecordProperty("n_scores", std::to_string(ctx.size()));
  RecordProperty("max_abs_logodds_delta", std::to_string(worst));
  // The scores must say something: not one constant value for every step.
  const auto [lo, hi] = std::minmax_element(kv_scores->logodds.begin(), kv_scores->logodds.end());
  EXPECT_GT(*hi - *lo, 0.1f);
  EXPECT_EQ(f.scratch->used_bytes(), 0) << "the text PRM kept blocks";
}

// The trained head's path: features (the RMS-normalised residual stream at the last verify token
// after block 4, the verify pass stopping there) and a probe's scores agree bit for bit
// between the KV-PRM and the text PRM. Any probe will do for equality, so a fixed one is built.
TEST(KvPrmScorer, ProbeFeaturesAndScoresEqualTextPrmBitForBit) {
  Fixture f;
  const int d = f.lm.config().n_embd;
  StepProbe probe;
  probe.layer = 4;  // of 30: the split forward is exercised and the text PRM re-encodes cheaply
  for (int i = 0; i < d; ++i) {
    probe.mean.push_back(0.01f * float(i % 7));
    probe.inv_std.push_back(1.0f);
    probe.weight.push_back(std::sin(0.37 * i));
  }
  f.head.probe = probe;
  f.head.feature_layer = probe.layer;
  f.head.read_logits = false;
  const std::vector<const KvSequence*> ctx = f.all_contexts();
  auto kv_scores = kv_prm_score(*f.lm.model, *f.kv, ctx, f.head, f.pool);
  ASSERT_TRUE(kv_scores.ok()) << kv_scores.error();
  ASSERT_EQ(kv_scores->n_features, d);
  const std::vector<std::vector<int32_t>> texts = f.all_texts();
  auto text_scores = text_prm_score(*f.lm.model, *f.scratch, texts, f.head, f.pool);
  ASSERT_TRUE(text_scores.ok()) << text_scores.error();
  ASSERT_EQ(kv_scores->features.size(), ctx.size() * size_t(d));
  ASSERT_EQ(kv_scores->features.size(), text_scores->features.size());
  EXPECT_EQ(0, std::memcmp(kv_scores->features.data(), text_scores->features.data(),
                           kv_scores->features.size() * sizeof(float)));
  EXPECT_EQ(kv_scores->score, text_scores->score);
  const auto [lo, hi] = std::minmax_element(kv_scores->score.begin(), kv_scores->score.end());
  EXPECT_GT(*hi - *lo, 0.01) << "every step got the same score: the features do not reach the probe";
}

struct BlockState {
  std::vector<int32_t> blocks;
  std::vector<int32_t> refcounts;
  std::vector<std::vector<uint8_t>> bytes;
};

BlockState snapshot(const KvManager& kv, const KvSequence& s) {
  BlockState st;
  st.blocks = s.blocks();
  for (int32_t b : s.blocks()) {
    st.refcounts.push_back(kv.pool().refcount(b));
    const auto* p = reinterpret_cast<const uint8_t*>(kv.arena().block_data(b));
    st.bytes.emplace_back(p, p + kv.bytes_per_block());
  }
  return st;
}

// Every context's next-token logits: forks continue with one token each (so the contexts stay), in
// one pass.
std::vector<float> next_logits(Fixture& f, const std::vector<const KvSequence*>& ctx, int32_t token) {
  std::vector<KvSequence> next;
  next.reserve(ctx.size());
  std::vector<KvSequence*> ptrs;
  const std::vector<int32_t> one = {token};
  std::vector<std::span<const int32_t>> parts(ctx.size(), std::span<const int32_t>(one));
  for (const KvSequence* c : ctx) {
    next.push_back(c->fork());
    ptrs.push_back(&next.back());
  }
  std::vector<float> logits;
  EXPECT_TRUE(prefill_together(*f.lm.model, *f.kv, ptrs, parts, f.pool, RowOutputs{&logits}).ok());
  return logits;
}

TEST(KvPrmScorer, ScoringLeavesThePolicyCacheUnchanged) {
  Fixture f;
  const std::vector<const KvSequence*> ctx = f.all_contexts();
  const int32_t step_token = f.lm.tokenizer->encode("Step", false, false).front();
  std::vector<BlockState> before;
  int partial = 0;
  for (const KvSequence* c : ctx) {
    before.push_back(snapshot(*f.kv, *c));
    partial += c->n_tokens() % f.kv->block_size() != 0;
  }
  const std::vector<float> logits_before = next_logits(f, ctx, step_token);
  ASSERT_GT(partial, 0) << "no context ends inside a block: copy on write is not exercised";
  const int64_t used_before = f.kv->used_bytes();
  auto scores = kv_prm_score(*f.lm.model, *f.kv, ctx, f.head, f.pool, 7);  // several forwards
  ASSERT_TRUE(scores.ok()) << scores.error();
  EXPECT_EQ(f.kv->used_bytes(), used_before) << "scoring leaked or freed blocks";
  for (size_t i = 0; i < ctx.size(); ++i) {
    const BlockState after = snapshot(*f.kv, *ctx[i]);
    EXPECT_EQ(after.blocks, before[i].blocks) << "context " << i;
    EXPECT_EQ(after.refcounts, before[i].refcounts) << "context " << i;
    EXPECT_TRUE(after.bytes == before[i].bytes) << "context " << i << ": K/V bytes changed";
  }
  const std::vector<float> logits_after = next_logits(f, ctx, step_token);
  ASSERT_EQ(logits_after.size(), logits_before.size());
  EXPECT_EQ(0, std::memcmp(logits_after.data(), logits_before.data(), logits_after.size() * sizeof(float)))
      << "next-token logits changed";
}

}  // namespace
}  // namespace agentkv::prm
