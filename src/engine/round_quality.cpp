// The exact baseline of a collective round (engine/round_quality.h).
#include "engine/round_quality.h"

#include <algorithm>
#include <string>

#include "engine/request_outcome.h"

namespace agentkv {

namespace {

// Queues a request whose events the one outcome folder collects into *o.
Status submit(Engine& e, RequestParams p, RequestOutcome* o) {
  auto id = e.add_request(std::move(p), [o](const RequestEvent& ev) { fold(*o, ev); });
  return id.ok() ? Status{} : id.status_error();
}

// Measures the turns `who` at once, into out; releases what it made before it returns.
Status measure_together(Engine& engine, const std::vector<RoundTurn>& turns, const CollectiveRoundResult& result,
                        int greedy_tokens, ApproxContext approx, const std::vector<size_t>& who,
                        std::vector<TurnQuality>& out) {
  const size_t n = turns.size();
  std::vector<RequestOutcome> exact(n), greedy(n), stored_greedy(n);
  std::vector<uint64_t> stored(n, 0);  // kStored: a dense copy of each turn's stored context
  struct Release {
    Engine& e;
    std::vector<RequestOutcome>& d;
    std::vector<uint64_t>& s;
    ~Release() {
      for (const RequestOutcome& x : d) e.release_retained(x.retained_kv);
      for (uint64_t h : s) e.release_retained(h);
    }
  } release{engine, exact, stored};
  // The exact context: [prefix][block] prefilled in full (the prefix cache holds only exact KV).
  for (size_t i : who) {
    const auto& prompt = turns[i].params.prompt;
    RequestParams p;
    p.prompt.assign(prompt.begin(), prompt.begin() + turns[i].segment.second);
    p.max_tokens = 0;
    p.retain_kv = true;
    p.cache_salt = turns[i].params.cache_salt;
    AGENTKV_TRY(submit(engine, std::move(p), &exact[i]));
  }
  AGENTKV_TRY(engine.run_until_idle());
  for (size_t i : who) {
    if (exact[i].error) return *exact[i].error;
    RequestParams p = turns[i].params;
    p.max_tokens = greedy_tokens;
    p.min_tokens = std::min(turns[i].params.min_tokens, greedy_tokens);
    p.kv_from = exact[i].retained_kv;
    p.retain_kv = false;
    if (approx == ApproxContext::kStored) {
      // Restored from master + diff when compact: the greedy answer a later turn would give from it.
      stored[i] = engine.fork_retained(result.turns[i].answer.retained_kv);
      if (!stored[i])
        return make_error(ErrorCode::kResourceExhausted,
                          "round quality: the KV budget cannot hold a dense copy of agent " + std::to_string(i) +
                              "'s stored context beside its exact context (" + std::to_string(who.size()) +
                              " agents measured at once); give it a larger KV budget or skip the quality "
                              "measurement");
      RequestParams q = p;
      // Resumed as a later turn would resume it: in attention, when the engine reads compact contexts so.
      const uint64_t h = result.turns[i].answer.retained_kv;
      q.kv_from = engine.resume_in_attention() && engine.is_compact(h) ? h : stored[i];
      AGENTKV_TRY(submit(engine, std::move(q), &stored_greedy[i]));
    }
    AGENTKV_TRY(submit(engine, std::move(p), &greedy[i]));
  }
  AGENTKV_TRY(engine.run_until_idle());
  const LoadedModel& lm = engine.model();
  for (size_t i : who) {
    const RoundTurnOutcome& o = result.turns[i];
    if (stored_greedy[i].error) return *stored_greedy[i].error;
    const auto& prompt = turns[i].params.prompt;
    std::vector<int32_t> cont(prompt.begin() + turns[i].segment.second, prompt.end());
    const size_t own = cont.size();
    cont.insert(cont.end(), o.answer.tokens.begin(), o.answer.tokens.end());
    const KvSequence* ex = engine.retained(exact[i].retained_kv);
    if (approx != ApproxContext::kStored && !engine.retained(o.blended))  // compact: read as its dense copy
      stored[i] = engine.fork_retained(o.blended);
    const KvSequence* ap = engine.retained(approx == ApproxContext::kStored || stored[i] ? stored[i] : o.blended);
    if (!ex || !ap) return make_error("round quality: a context to compare was not retained");
    // The stored context goes on past the block (own prompt, answer): compared up to the block's end.
    KvSequence upto = ap->fork();
    upto.truncate(ex->n_tokens());
    auto q = compare_continuation(*lm.model, engine.kv(), *ex, upto, cont, engine.pool(), own);
    if (!q.ok()) return q.status_error();
    TurnQuality& t = out[i];
    t.quality = std::move(*q);
    t.measured = true;
    const std::vector<int32_t>& answer = approx == ApproxContext::kStored ? stored_greedy[i].tokens : o.answer.tokens;
    const size_t cmp = std::min({size_t(greedy_tokens), answer.size(), greedy[i].tokens.size()});
    size_t same = 0;
    while (same < cmp && answer[same] == greedy[i].tokens[same]) ++same;
    t.greedy_agreement = cmp ? double(same) / double(cmp) : 1.0;
  }
  return {};
}

}  // namespace

Result<std::vector<TurnQuality>> measure_round_quality(Engine& engine, const std::vector<RoundTurn>& turns,
                                                       const CollectiveRoundResult& result, int greedy_tokens,
                                                       ApproxContext approx) {
  const size_t n = turns.size();
  if (result.turns.size() != n) return make_error("round quality: the result does not match the turns");
  std::vector<TurnQuality> out(n);
  std::vector<size_t> who;
  for (size_t i = 0; i < n; ++i)
    if (result.turns[i].shared && result.turns[i].blended && !result.turns[i].answer.tokens.empty()) who.push_back(i);
  // Each measured turn holds its exact context, a dense copy of its stored (or blended) context and
  // two greedy continuations at once: as many turns at a time as the free KV holds (at least one), so
  // a large round's long contexts are measured in groups instead of refused. The grouping changes a
  // turn's figures only as the engine's batching changes its arithmetic (the exact prefill and the
  // greedy answers run in other batches: last-bit differences that can flip a near-tie token).
  const int64_t bs = engine.kv().block_size();
  int64_t need = 1;
  for (size_t i : who) {
    const int64_t ctx = int64_t(turns[i].params.prompt.size()) + int64_t(result.turns[i].answer.tokens.size());
    need = std::max(need, 2 * ((ctx + greedy_tokens + bs - 1) / bs + 1) + 2 * ((greedy_tokens + bs - 1) / bs + 1));
  }
  const size_t group = size_t(std::max<int64_t>(1, engine.kv().pool().num_free() * 9 / 10 / need));
  for (size_t g = 0; g < who.size(); g += group) {
    const std::vector<size_t> part(who.begin() + int64_t(g), who.begin() + int64_t(std::min(who.size(), g + group)));
    AGENTKV_TRY(measure_together(engine, turns, result, greedy_tokens, approx, part, out));
  }
  return out;
}

}  // namespace agentkv
