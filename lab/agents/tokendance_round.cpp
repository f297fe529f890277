#include "tokendance_round.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <set>

#include "engine/request_outcome.h"
#include "engine/segment_collector.h"
#include "share/master_diff.h"
#include "util/monotonic_clock.h"

namespace agentkv {

std::vector<int32_t> TurnTokens::all() const {
  std::vector<int32_t> t = prefix;
  t.insert(t.end(), segment.begin(), segment.end());
  t.insert(t.end(), own.begin(), own.end());
  return t;
}

TurnTokens turn_tokens(const Tokenizer& tok, const AgentTurn& t) {
  TurnTokens p;
  p.prefix = tok.encode(t.prompt.substr(0, t.private_end), tok.add_bos_default(), false);
  p.segment = tok.encode(t.prompt.substr(t.private_end, t.shared_end - t.private_end), false, false);
  p.own = tok.encode(t.prompt.substr(t.shared_end), false, false);
  return p;
}

namespace {

struct Done {
  uint64_t retained = 0;
  std::vector<int32_t> tokens;
  std::string text;
  double ttft = -1;
  std::string error;
};

// Queues a request whose events land in *d.
Status submit(Engine& e, RequestParams p, Done* d, double t0) {
  auto id = e.add_request(std::move(p), [d, t0](const RequestEvent& ev) {
    if (ev.has_token && d->ttft < 0) d->ttft = monotonic_seconds() - t0;
    if (answer_token(ev)) d->tokens.push_back(ev.token);
    d->text += ev.text;
    if (!ev.error.empty()) d->error = ev.error;
    if (ev.request_finished) d->retained = ev.retained_kv;
  });
  return id.ok() ? Status{} : make_error(id.error());
}

RequestParams prefill_only(std::vector<int32_t> prompt, uint64_t kv_from) {
  RequestParams p;
  p.prompt = std::move(prompt);
  p.max_tokens = 0;
  p.retain_kv = true;
  p.kv_from = kv_from;
  return p;
}

}  // namespace

Result<TokendanceRoundOut> run_tokendance_round(Engine& engine, ThreadPool& pool, const std::vector<AgentTurn>& turns,
                                                const TokendanceOptions& opt, bool time_per_agent) {
  const LoadedModel& lm = engine.model();
  const Tokenizer& tok = *lm.tokenizer;
  const size_t n = turns.size();
  TokendanceRoundOut out;
  out.agents.resize(n);
  std::vector<TurnTokens> pieces;
  for (const AgentTurn& t : turns) pieces.push_back(turn_tokens(tok, t));
  // Agents whose segment is the round's (the first non-empty one) share it; the rest run plainly.
  std::vector<int32_t> segment;
  for (const TurnTokens& p : pieces)
    if (!p.segment.empty()) {
      segment = p.segment;
      break;
    }
  std::vector<char> sharing(n, 0);
  for (size_t i = 0; i < n; ++i) sharing[i] = !segment.empty() && pieces[i].segment == segment;
  out.segment_tokens = int64_t(segment.size());

  const EngineMetrics m0 = engine.metrics();
  engine.kv().pool().reset_peak_used();
  const double t0 = monotonic_seconds();

  // 1. Prefixes (exact, prefix-cached) and the master [BOS][segment], all in one engine run.
  std::vector<Done> prefix_done(n), master_done(1);
  for (size_t i = 0; i < n; ++i)
    if (sharing[i]) AGENTKV_TRY(submit(engine, prefill_only(pieces[i].prefix, 0), &prefix_done[i], t0));
  std::vector<int32_t> master_tokens;
  if (tok.add_bos_default()) master_tokens.push_back(tok.bos_id());
  const int32_t master_start = int32_t(master_tokens.size());
  master_tokens.insert(master_tokens.end(), segment.begin(), segment.end());
  if (!segment.empty()) AGENTKV_TRY(submit(engine, prefill_only(master_tokens, 0), &master_done[0], t0));
  AGENTKV_TRY(engine.run_until_idle());
  for (const Done& d : prefix_done)
    if (!d.error.empty()) return make_error(d.error);
  if (!master_done[0].error.empty()) return make_error(master_done[0].error);

  // 2. The collective step: every sharing agent's copy of the segment in one call.
  std::vector<size_t> who;
  std::vector<uint64_t> prefix_handles;
  for (size_t i = 0; i < n; ++i)
    if (sharing[i]) {
      who.push_back(i);
      prefix_handles.push_back(prefix_done[i].retained);
    }
  std::shared_ptr<const MasterSegment> master;
  std::vector<CollectedCopy> copies;
  if (!segment.empty()) {
    const KvSequence* ms = engine.retained(master_done[0].retained);
    if (!ms) return make_error("tokendance: the master's prefill was not retained");
    master = std::make_shared<const MasterSegment>(ms->fork(), master_start, master_start);
    if (!who.empty()) {
      const double c0 = monotonic_seconds();
      auto res = collect_shared_segment(engine, master_done[0].retained, master_start, segment, prefix_handles,
                                        opt.recompute);
      if (!res.ok()) return make_error(res.error());
      out.collector_seconds = monotonic_seconds() - c0;
      copies = std::move(*res);
    }
    engine.release_retained(master_done[0].retained);
  }
  std::vector<uint64_t> blended_handles(n, 0);
  for (size_t k = 0; k < who.size(); ++k) {
    out.agents[who[k]].segment_recomputed = int64_t(copies[k].recomputed_slots.size());
    blended_handles[who[k]] = copies[k].handle;
  }

  // 3. Every agent's own prompt and answer, from its blended context, all together.
  std::vector<Done> answers(n);
  for (size_t i = 0; i < n; ++i) {
    RequestParams p;
    p.prompt = pieces[i].all();
    p.max_tokens = turns[i].max_tokens;
    p.min_tokens = std::min(turns[i].min_tokens, turns[i].max_tokens);
    p.kv_from = blended_handles[i];
    p.retain_kv = sharing[i] != 0;
    out.agents[i].prompt_tokens = int64_t(p.prompt.size());
    AGENTKV_TRY(submit(engine, std::move(p), &answers[i], t0));
  }
  AGENTKV_TRY(engine.run_until_idle());
  out.round_seconds = monotonic_seconds() - t0;
  for (size_t i = 0; i < n; ++i) {
    if (!answers[i].error.empty()) return make_error("agent " + std::to_string(turns[i].agent) + ": " + answers[i].error);
    out.agents[i].text = answers[i].text;
    out.agents[i].tokens = answers[i].tokens;
    out.agents[i].ttft = answers[i].ttft;
  }
  const EngineMetrics m1 = engine.metrics();
  out.peak_blocks = engine.kv().pool().stats().peak_used;
  out.preemptions = int64_t(m1.preemptions - m0.preemptions);
  int64_t seg_recomputed = 0;
  for (const auto& c : copies) seg_recomputed += int64_t(c.recomputed_slots.size());
  out.prefill_computed = int64_t(m1.tokens_prefilled - m0.tokens_prefilled) + seg_recomputed;
  int64_t prompt_total = 0;
  for (const auto& a : out.agents) prompt_total += a.prompt_tokens;
  out.prefill_reused = std::max<int64_t>(0, prompt_total - out.prefill_computed + int64_t(master_tokens.size()));
  out.prefill_seconds = (m1.prefill_seconds - m0.prefill_seconds) + out.collector_seconds;

  // The same reuse agent by agent, for the collector's gain (measurement only: scratch copies).
  if (time_per_agent && !who.empty()) {
    double total = 0;
    for (size_t k = 0; k < who.size(); ++k) {
      KvSequence s = engine.retained(prefix_done[who[k]].retained)->fork();
      if (!s.reserve(int64_t(segment.size()))) break;
      const int32_t p = int32_t(pieces[who[k]].prefix.size());
      const AgentSegment one{SeqBlocks{s.blocks().data(), int32_t(s.blocks().size())}, p, p};
      const double c0 = monotonic_seconds();
      auto res = selective_recompute(*lm.model, engine.kv().arena(), master->view(), segment,
                                     std::span<const AgentSegment>(&one, 1), opt.recompute, pool);
      total += monotonic_seconds() - c0;
      if (!res.ok()) return make_error(res.error());
    }
    out.collector_per_agent_seconds = total;
  }

  // Quality against the exact context (not timed): the answer scored under both, and the exact
  // context's own greedy answer compared with it.
  if (opt.measure_quality && !who.empty()) {
    std::vector<Done> exact(n), greedy(n);
    for (size_t i : who) {
      std::vector<int32_t> ctx = pieces[i].prefix;
      ctx.insert(ctx.end(), segment.begin(), segment.end());
      AGENTKV_TRY(submit(engine, prefill_only(std::move(ctx), prefix_done[i].retained), &exact[i], t0));
    }
    AGENTKV_TRY(engine.run_until_idle());
    for (size_t i : who) {
      if (!exact[i].error.empty()) return make_error(exact[i].error);
      RequestParams p;
      p.prompt = pieces[i].all();
      p.max_tokens = opt.greedy_tokens;
      p.min_tokens = std::min(turns[i].min_tokens, opt.greedy_tokens);
      p.kv_from = exact[i].retained;
      AGENTKV_TRY(submit(engine, std::move(p), &greedy[i], t0));
    }
    AGENTKV_TRY(engine.run_until_idle());
    for (size_t i : who) {
      TokendanceAgentOut& a = out.agents[i];
      if (a.tokens.empty()) continue;
      std::vector<int32_t> cont = pieces[i].own;
      cont.insert(cont.end(), a.tokens.begin(), a.tokens.end());
      auto q = compare_continuation(*lm.model, engine.kv(), *engine.retained(exact[i].retained),
                                    *engine.retained(blended_handles[i]), cont, pool, pieces[i].own.size());
      if (!q.ok()) return make_error(q.error());
      a.quality = *q;
      a.has_quality = true;
      const size_t cmp = std::min({size_t(opt.greedy_tokens), a.tokens.size(), greedy[i].tokens.size()});
      size_t same = 0;
      while (same < cmp && a.tokens[same] == greedy[i].tokens[same]) ++same;
      a.greedy_agreement = cmp ? double(same) / double(cmp) : 1.0;
    }
    for (size_t i : who) engine.release_retained(exact[i].retained);
  }
  for (size_t i = 0; i < n; ++i) engine.release_retained(blended_handles[i]);

  // 4. Master–diff residency: each agent keeps its exact prefix, a diff against the master and its
  //    own prompt + answer packed; the dense blended contexts go.
  std::vector<SegmentDiff> kept_diffs;
  std::vector<PackedKv> kept_tails;
  for (size_t k = 0; k < who.size(); ++k) {
    const size_t i = who[k];
    const KvSequence* fin = engine.retained(answers[i].retained);
    if (!fin) return make_error("tokendance: an agent's final context was not retained");
    const int32_t p = int32_t(pieces[i].prefix.size());
    const KvSlotRange dense{SeqBlocks{fin->blocks().data(), int32_t(fin->blocks().size())}, p};
    std::vector<int32_t> rows;
    for (int32_t slot : copies[k].recomputed_slots) rows.push_back(slot - p);
    auto diff = SegmentDiff::extract(master, dense, p, std::move(rows));
    const int32_t tail0 = p + int32_t(segment.size());
    auto tail = PackedKv::pack(engine.kv(), KvSlotRange{dense.blocks, tail0}, int32_t(fin->n_tokens()) - tail0);
    if (!diff || !tail) return make_error("tokendance: the KV budget cannot hold the diffs (raise --kv-mem)");
    kept_diffs.push_back(std::move(*diff));
    kept_tails.push_back(std::move(*tail));
    engine.release_retained(answers[i].retained);
  }
  master.reset();  // the diffs hold it now
  // What is resident: prefixes (their snapshots), the master (via the diffs), diffs and tails. Blocks
  // referenced more than once are shared (a common preamble of the prefixes, the master).
  const BlockPoolStats ps = engine.kv().pool().stats();
  out.resident_blocks = ps.n_used;
  std::map<int32_t, int> holders;
  for (size_t i : who)
    for (int32_t b : engine.retained(prefix_done[i].retained)->blocks()) ++holders[b];
  int64_t shared_prefix = 0;
  for (auto& [b, c] : holders) shared_prefix += c > 1;
  const int64_t master_blocks = kept_diffs.empty() ? 0 : kept_diffs.front().master()->n_blocks();
  out.shared_blocks = shared_prefix + master_blocks;
  kept_diffs.clear();
  kept_tails.clear();
  for (size_t i : who) engine.release_retained(prefix_done[i].retained);
  return out;
}

}  // namespace agentkv
