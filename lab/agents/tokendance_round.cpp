// bench-agents' tokendance round over the product's collective-round job (tokendance_round.h).
#include "tokendance_round.h"

#include <algorithm>
#include <optional>

#include "engine/collective_round.h"
#include "engine/round_quality.h"
#include "share/master_diff.h"
#include "share/master_diff_attention.h"
#include "share/turn_pieces.h"
#include "util/monotonic_clock.h"

namespace agentkv {

std::vector<int32_t> TurnTokens::all() const {
  std::vector<int32_t> t = prefix;
  t.insert(t.end(), segment.begin(), segment.end());
  t.insert(t.end(), own.begin(), own.end());
  return t;
}

TurnTokens turn_tokens(const Tokenizer& tok, const AgentTurn& t) {
  std::vector<std::pair<size_t, size_t>> pieces = t.earlier_pieces;
  pieces.emplace_back(t.private_end, t.shared_end);
  const AgentContextTokens c = tokenize_pieces(tok, t.prompt, pieces, false);
  const auto [b, e] = c.segments.back();
  TurnTokens p;
  p.prefix.assign(c.tokens.begin(), c.tokens.begin() + b);
  p.segment.assign(c.tokens.begin() + b, c.tokens.begin() + e);
  p.own.assign(c.tokens.begin() + e, c.tokens.end());
  for (size_t k = 0; k < t.earlier_piece_shared.size() && k + 1 < c.segments.size(); ++k)
    if (t.earlier_piece_shared[k]) p.earlier_shared_tokens += c.segments[k].second - c.segments[k].first;
  return p;
}

namespace {

// Every used block and, of those, the blocks held more than once (masters, common preambles).
std::pair<int64_t, int64_t> resident_blocks(const BlockPool& pool) {
  int64_t used = 0, shared = 0;
  for (int32_t b = 0; b < int32_t(pool.n_blocks()); ++b) {
    const int32_t r = pool.refcount(b);
    used += r > 0;
    shared += r > 1;
  }
  return {used, shared};
}

}  // namespace

Result<TokendanceRoundOut> run_tokendance_round(Engine& engine, ThreadPool& pool, const std::vector<AgentTurn>& turns,
                                                const TokendanceOptions& opt, bool time_per_agent,
                                                std::map<int, uint64_t>* resident) {
  const LoadedModel& lm = engine.model();
  const Tokenizer& tok = *lm.tokenizer;
  const size_t n = turns.size();
  TokendanceRoundOut out;
  out.agents.resize(n);
  std::vector<TurnTokens> pieces;
  std::vector<RoundTurn> rt(n);
  for (size_t i = 0; i < n; ++i) {
    pieces.push_back(turn_tokens(tok, turns[i]));
    RequestParams& p = rt[i].params;
    p.prompt = pieces[i].all();
    p.max_tokens = turns[i].max_tokens;
    p.min_tokens = std::min(turns[i].min_tokens, turns[i].max_tokens);
    p.kv_from = (*resident)[turns[i].agent];
    const int64_t b = int64_t(pieces[i].prefix.size());
    if (!pieces[i].segment.empty()) rt[i].segment = {b, b + int64_t(pieces[i].segment.size())};
    out.agents[i].prompt_tokens = int64_t(p.prompt.size());
  }

  const EngineMetrics m0 = engine.metrics();
  engine.kv().pool().reset_peak_used();
  const double t0 = monotonic_seconds();
  CollectiveRoundOptions ro;
  ro.recompute = opt.recompute.ratio;
  // Kept for the quality and agent-by-agent measurements below, on the sample only when there is
  // one (a kept copy stays pinned through the round's later waves).
  ro.keep_blended = opt.measure_quality || time_per_agent;
  if (!opt.quality_agents.empty())
    for (const AgentTurn& t : turns) ro.keep_only.push_back(opt.quality_agents.count(t.agent) > 0);
  std::optional<CollectiveRoundResult> got;
  start_collective_round(engine, rt, ro, [&got](CollectiveRoundResult&& r) { got = std::move(r); });
  AGENTKV_TRY(engine.run_until_idle());
  out.round_seconds = monotonic_seconds() - t0;
  if (!got) return make_error("tokendance: the round job did not finish");
  if (!got->status.ok()) return make_error(got->status.error());
  const CollectiveRoundResult& res = *got;
  struct Release {
    Engine& e;
    const CollectiveRoundResult& r;
    ~Release() {
      for (const RoundTurnOutcome& o : r.turns) {
        e.release_retained(o.blended);
        e.release_retained(o.prefix);
      }
      for (const auto& [m, start] : r.masters) e.release_retained(m);
    }
  } release{engine, res};
  std::vector<size_t> who;  // the agents whose block was shared
  for (size_t i = 0; i < n; ++i) {
    const RoundTurnOutcome& o = res.turns[i];
    (*resident)[turns[i].agent] = o.answer.retained_kv;
    TokendanceAgentOut& a = out.agents[i];
    a.text = o.answer.text;
    a.tokens = o.answer.tokens;
    a.ttft = o.ttft;
    a.segment_recomputed = o.recomputed;
    a.private_tokens = a.prompt_tokens + int64_t(a.tokens.size()) - pieces[i].earlier_shared_tokens -
                       (o.shared ? int64_t(pieces[i].segment.size()) : 0);
    if (o.shared) who.push_back(i);
  }
  out.segment_tokens = res.sharing.segment_tokens;
  out.collector_seconds = res.sharing.collector_seconds;
  out.waves = res.sharing.waves;
  out.master_context = res.sharing.master_context;
  const EngineMetrics m1 = engine.metrics();
  out.peak_blocks = engine.kv().pool().stats().peak_used;
  out.preemptions = int64_t(m1.preemptions - m0.preemptions);
  out.echo_tokens = int64_t(m1.echo_tokens - m0.echo_tokens);
  out.prefill_computed = int64_t(m1.tokens_prefilled - m0.tokens_prefilled) + res.sharing.recomputed_tokens;
  int64_t prompt_total = 0;
  for (const auto& a : out.agents) prompt_total += a.prompt_tokens;
  // Reused: the agents' prompt tokens not computed for them (the masters' prefill is work, but not of
  // any agent's prompt; a master the prefix cache already held cost nothing).
  out.prefill_reused =
      std::max<int64_t>(0, prompt_total - (out.prefill_computed - res.sharing.master_tokens_computed));
  out.prefill_seconds = (m1.prefill_seconds - m0.prefill_seconds) + out.collector_seconds;

  // The same reuse agent by agent, for the collector's gain (measurement only: scratch copies of
  // each agent's exact prefix). On a sample, the sampled agents' time scaled to every shared agent.
  if (time_per_agent && !who.empty()) {
    double total = 0;
    size_t timed = 0;
    for (size_t i : who) {
      if (!res.turns[i].prefix) continue;  // not kept: outside the sample
      ++timed;
      const auto [mh, start] = res.masters[i];
      const int32_t p = int32_t(pieces[i].prefix.size());
      // A prefix resumed in attention is compact: read through its diffs, as the collector reads it.
      const auto compact = engine.compact_context(res.turns[i].prefix);
      const KvSequence* prefix = compact ? compact->kept().get() : engine.retained(res.turns[i].prefix);
      if (!prefix) return make_error("tokendance: a kept prefix was not retained");
      KvSequence s = prefix->fork();
      if (!s.reserve(int64_t(pieces[i].segment.size()))) break;
      const MasterSegment master(engine.retained(mh)->fork(), start, start);
      AgentSegment one{SeqBlocks{s.blocks().data(), int32_t(s.blocks().size())}, p, p};
      std::optional<MasterDiffAttention> view;
      if (compact && !compact->diffs().empty()) {
        view.emplace(MasterDiffAttention::of(*lm.model, s, compact->diffs()));
        one.context = &*view;
      }
      const double c0 = monotonic_seconds();
      auto r = selective_recompute(*lm.model, engine.kv().arena(), master.view(), pieces[i].segment,
                                   std::span<const AgentSegment>(&one, 1), opt.recompute, pool);
      total += monotonic_seconds() - c0;
      if (!r.ok()) return make_error(r.error());
    }
    out.collector_per_agent_seconds = timed ? total * double(who.size()) / double(timed) : 0;
  }

  // Quality against the exact context (not timed), as the start-up gate measures it.
  if (opt.measure_quality && !who.empty()) {
    std::vector<TurnQuality> q;  // the kept turns: the sample, if any
    AGENTKV_ASSIGN_OR_RETURN(q, measure_round_quality(engine, rt, res, opt.greedy_tokens, opt.quality_of));
    for (size_t i = 0; i < n; ++i) {
      if (!q[i].measured) continue;
      out.agents[i].has_quality = true;
      out.agents[i].quality = std::move(q[i].quality);
      out.agents[i].greedy_agreement = q[i].greedy_agreement;
    }
  }
  // What stays resident between rounds: every agent's context as the job left it (exact prefix
  // blocks, master by reference, packed diff and own turn). Blocks held more than once are shared.
  for (const RoundTurnOutcome& o : res.turns) {
    engine.release_retained(o.blended);
    engine.release_retained(o.prefix);
  }
  for (const auto& [m, start] : res.masters) engine.release_retained(m);
  const auto [used, shared] = resident_blocks(engine.kv().pool());
  out.resident_blocks = used;
  out.shared_blocks = shared;
  const EngineMetrics m2 = engine.metrics();
  out.diff_blocks = m2.retained_diff_blocks;
  out.diff_bytes = m2.retained_diff_bytes;
  return out;
}

}  // namespace agentkv
