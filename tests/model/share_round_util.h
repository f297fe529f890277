// An all-gather round laid out in one KV arena for the selective-recompute tests: each agent's
// context is [private prefix][shared segment][own prompt], taken from a bench workload's round 0 and
// tokenized piece by piece as every mode tokenizes it (turn_tokens; the workload ends each piece
// where the tokenizer splits the same way for every agent). Two ways to fill an agent's KV: full prefill of the whole context (the reference),
// or prefix prefill + the segment from a master copy via selective_recompute + prompt prefill.
// Everything runs batch-invariant, so the two agree bit for bit wherever they compute the same thing.
#pragma once

#include <string>
#include <vector>

#include "share/selective_recompute.h"
#include "share_test_util.h"
#include "lab/agents/tokendance_round.h"
#include "lab/agents/workload.h"

namespace agentkv::testing {

inline constexpr int kRoundBlockSize = 16;

struct RoundTokens {
  std::vector<int32_t> segment;
  std::vector<std::vector<int32_t>> prefix, prompt;  // per agent
  size_t n_agents() const { return prefix.size(); }
};

inline RoundTokens round_tokens(const LoadedModel& lm, const std::string& workload, int n_agents, uint64_t seed) {
  WorkloadOptions wo;
  wo.n_agents = n_agents;
  wo.seed = seed;
  auto w = make_workload(workload, wo);
  EXPECT_TRUE(w.ok()) << w.error();
  const Tokenizer& tok = *lm.tokenizer;
  RoundTokens r;
  for (const AgentTurn& t : (*w)->round(0)) {
    TurnTokens p = turn_tokens(tok, t);  // the one piece tokenization (share/turn_pieces.h)
    r.prefix.push_back(std::move(p.prefix));
    if (r.segment.empty()) r.segment = p.segment;
    EXPECT_EQ(p.segment, r.segment) << "the shared block tokenizes differently for agent " << t.agent;
    r.prompt.push_back(std::move(p.own));
  }
  return r;
}

// Runs tokens at positions/slots pos0.. / slot0.. of one block table, logits for every token when
// want_logits (returned [n][n_vocab]).
inline std::vector<float> prefill(const Model& m, const KvArena& kv, const std::vector<int32_t>& table,
                                  const std::vector<int32_t>& toks, int32_t pos0, int32_t slot0, bool want_logits,
                                  ThreadPool& pool) {
  Batch b = invariant_batch();
  b.seqs.push_back(SeqBlocks{table.data(), int32_t(table.size())});
  for (size_t i = 0; i < toks.size(); ++i) b.add(toks[i], pos0 + int32_t(i), 0, slot0 + int32_t(i), want_logits);
  std::vector<float> logits(want_logits ? toks.size() * size_t(m.config().n_vocab) : 0);
  std::vector<float> hidden(toks.size() * size_t(m.config().n_embd));
  const Status st = m.forward_layers(b, kv, 0, m.config().n_layer, hidden.data(), logits.data(), pool);
  EXPECT_TRUE(st.ok()) << st.error();
  return logits;
}

// Block tables for the round, handed out from one arena: the master's and, per agent, one for the
// reference and one for the reused copy.
struct RoundLayout {
  std::vector<int32_t> master;
  std::vector<std::vector<int32_t>> reference, reused;
  int64_t n_blocks = 0;

  explicit RoundLayout(const RoundTokens& r) {
    master = take(1 + int64_t(r.segment.size()));
    for (size_t a = 0; a < r.n_agents(); ++a) {
      const int64_t len = int64_t(r.prefix[a].size() + r.segment.size() + r.prompt[a].size());
      reference.push_back(take(len));
      reused.push_back(take(len));
    }
  }

 private:
  std::vector<int32_t> take(int64_t slots) {
    std::vector<int32_t> t = block_run(int32_t(n_blocks), blocks_for(slots, kRoundBlockSize));
    n_blocks += int64_t(t.size());
    return t;
  }
};

// Full prefill of agent a's whole context into its reference table; logits of its prompt tokens.
inline std::vector<float> reference_prompt_logits(const Model& m, const KvArena& kv, const RoundLayout& L,
                                                  const RoundTokens& r, size_t a, ThreadPool& pool) {
  std::vector<int32_t> ctx = r.prefix[a];
  ctx.insert(ctx.end(), r.segment.begin(), r.segment.end());
  const size_t head = ctx.size();
  ctx.insert(ctx.end(), r.prompt[a].begin(), r.prompt[a].end());
  const std::vector<float> all = prefill(m, kv, L.reference[a], ctx, 0, 0, true, pool);
  return std::vector<float>(all.begin() + int64_t(head) * m.config().n_vocab, all.end());
}

// The master: the segment on its own (after BOS where the model's prompts start with one), as a
// round's engine computes it once, keyed by content alone.
inline SegmentMaster compute_master(const LoadedModel& lm, const KvArena& kv, const RoundLayout& L,
                                    const RoundTokens& r, ThreadPool& pool) {
  std::vector<int32_t> toks;
  if (lm.tokenizer->add_bos_default()) toks.push_back(lm.tokenizer->bos_id());
  const int32_t start = int32_t(toks.size());
  toks.insert(toks.end(), r.segment.begin(), r.segment.end());
  prefill(*lm.model, kv, L.master, toks, 0, 0, false, pool);
  return SegmentMaster{KvSlotRange{SeqBlocks{L.master.data(), int32_t(L.master.size())}, start}, start};
}

inline AgentSegment agent_segment(const RoundLayout& L, const RoundTokens& r, size_t a) {
  const int32_t p = int32_t(r.prefix[a].size());
  return AgentSegment{SeqBlocks{L.reused[a].data(), int32_t(L.reused[a].size())}, p, p};
}

// Prefix prefill of the given agents into their reused tables (selective recompute and prompt
// prefill leave those slots alone, so one prefill serves several runs).
inline void prefill_prefixes(const Model& m, const KvArena& kv, const RoundLayout& L, const RoundTokens& r,
                             const std::vector<size_t>& who, ThreadPool& pool) {
  for (size_t a : who) prefill(m, kv, L.reused[a], r.prefix[a], 0, 0, false, pool);
}

// Selective recompute of the segment for the given agents (prefixes already prefilled) in one call,
// then each prompt's prefill; returns the per-agent prompt logits and the diffs through *diffs.
inline std::vector<std::vector<float>> reused_prompt_logits(const LoadedModel& lm, const KvArena& kv,
                                                            const RoundLayout& L, const RoundTokens& r,
                                                            const SegmentMaster& master, const std::vector<size_t>& who,
                                                            const RecomputeOptions& o, ThreadPool& pool,
                                                            std::vector<AgentRecompute>* diffs = nullptr) {
  std::vector<AgentSegment> agents;
  for (size_t a : who) agents.push_back(agent_segment(L, r, a));
  auto res = selective_recompute(*lm.model, kv, master, r.segment, agents, o, pool);
  EXPECT_TRUE(res.ok()) << res.error();
  if (diffs && res.ok()) *diffs = *res;
  std::vector<std::vector<float>> out;
  for (size_t a : who) {
    const int32_t at = int32_t(r.prefix[a].size() + r.segment.size());
    out.push_back(prefill(*lm.model, kv, L.reused[a], r.prompt[a], at, at, true, pool));
  }
  return out;
}

// Appends to every agent's prompt the first n - 1 tokens of its greedy reply under full prefill, so
// the prompt logits then also cover the reply's first n next-token distributions (teacher-forced on
// the reference's own reply). The agents decode together, one token each per step.
inline void extend_prompts_with_greedy_reply(const Model& m, RoundTokens& r, int n, ThreadPool& pool) {
  std::vector<std::vector<int32_t>> tables, ctx(r.n_agents());
  int64_t n_blocks = 0;
  for (size_t a = 0; a < r.n_agents(); ++a) {
    ctx[a] = r.prefix[a];
    ctx[a].insert(ctx[a].end(), r.segment.begin(), r.segment.end());
    ctx[a].insert(ctx[a].end(), r.prompt[a].begin(), r.prompt[a].end());
    tables.push_back(block_run(int32_t(n_blocks), blocks_for(int64_t(ctx[a].size()) + n, kRoundBlockSize)));
    n_blocks += int64_t(tables.back().size());
  }
  KvArena kv(m.config(), kRoundBlockSize, n_blocks);
  const int nv = m.config().n_vocab;
  std::vector<int32_t> next(r.n_agents());
  for (size_t a = 0; a < r.n_agents(); ++a) {
    const std::vector<float> logits = prefill(m, kv, tables[a], ctx[a], 0, 0, true, pool);
    next[a] = argmax(logits.data() + (ctx[a].size() - 1) * nv, nv);
  }
  for (int step = 1; step < n; ++step) {
    Batch b = invariant_batch();
    for (size_t a = 0; a < r.n_agents(); ++a) {
      b.seqs.push_back(SeqBlocks{tables[a].data(), int32_t(tables[a].size())});
      r.prompt[a].push_back(next[a]);
      const int32_t at = int32_t(ctx[a].size()) + step - 1;
      b.add(next[a], at, int32_t(a), at, true);
    }
    std::vector<float> logits(r.n_agents() * size_t(nv)), hidden(r.n_agents() * size_t(m.config().n_embd));
    const Status st = m.forward_layers(b, kv, 0, m.config().n_layer, hidden.data(), logits.data(), pool);
    ASSERT_TRUE(st.ok()) << st.error();
    for (size_t a = 0; a < r.n_agents(); ++a) next[a] = argmax(logits.data() + a * nv, nv);
  }
}

// Reused against reference next-token distributions, over rows [first_row, end) of each agent's
// prompt logits: mean, 95th percentile and max KL (nats) and the fraction of rows whose argmax agrees.
struct Quality {
  double mean_kl = 0, p95_kl = 0, max_kl = 0, agreement = 0;
  size_t rows = 0;
};

inline Quality compare(const std::vector<std::vector<float>>& ref, const std::vector<std::vector<float>>& got,
                       int n_vocab, const std::vector<size_t>& first_row = {}) {
  Quality q;
  std::vector<double> kls;
  size_t agree = 0;
  for (size_t a = 0; a < ref.size(); ++a)
    for (size_t t = first_row.empty() ? 0 : first_row[a]; t * n_vocab < ref[a].size(); ++t) {
      const float* r = ref[a].data() + t * n_vocab;
      const float* g = got[a].data() + t * n_vocab;
      kls.push_back(kl_of_logits(r, g, n_vocab));
      agree += argmax(r, n_vocab) == argmax(g, n_vocab);
    }
  q.rows = kls.size();
  if (kls.empty()) return q;
  q.mean_kl = std::accumulate(kls.begin(), kls.end(), 0.0) / double(kls.size());
  q.agreement = double(agree) / double(kls.size());
  std::sort(kls.begin(), kls.end());
  q.p95_kl = kls[std::min(kls.size() - 1, size_t(0.95 * double(kls.size())))];
  q.max_kl = kls.back();
  return q;
}

}  // namespace agentkv::testing
