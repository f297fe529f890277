// The exact baseline of a collective round (engine/round_quality.h).
#include "engine/round_quality.h"

#include <algorithm>

#include "engine/request_outcome.h"

namespace agentkv {

namespace {

// Queues a request whose events the one outcome folder collects into *o.
Status submit(Engine& e, RequestParams p, RequestOutcome* o) {
  auto id = e.add_request(std::move(p), [o](const RequestEvent& ev) { fold(*o, ev); });
  return id.ok() ? Status{} : id.status_error();
}

}  // namespace

Result<std::vector<TurnQuality>> measure_round_quality(Engine& engine, const std::vector<RoundTurn>& turns,
                                                       const CollectiveRoundResult& result, int greedy_tokens) {
  const size_t n = turns.size();
  if (result.turns.size() != n) return make_error("round quality: the result does not match the turns");
  std::vector<TurnQuality> out(n);
  std::vector<size_t> who;
  for (size_t i = 0; i < n; ++i)
    if (result.turns[i].shared && result.turns[i].blended && !result.turns[i].answer.tokens.empty()) who.push_back(i);
  std::vector<RequestOutcome> exact(n), greedy(n);
  struct Release {
    Engine& e;
    std::vector<RequestOutcome>& d;
    ~Release() {
      for (const RequestOutcome& x : d) e.release_retained(x.retained_kv);
    }
  } release{engine, exact};
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
    AGENTKV_TRY(submit(engine, std::move(p), &greedy[i]));
  }
  AGENTKV_TRY(engine.run_until_idle());
  const LoadedModel& lm = engine.model();
  for (size_t i : who) {
    const RoundTurnOutcome& o = result.turns[i];
    const auto& prompt = turns[i].params.prompt;
    std::vector<int32_t> cont(prompt.begin() + turns[i].segment.second, prompt.end());
    const size_t own = cont.size();
    cont.insert(cont.end(), o.answer.tokens.begin(), o.answer.tokens.end());
    const KvSequence* ex = engine.retained(exact[i].retained_kv);
    const KvSequence* bl = engine.retained(o.blended);
    if (!ex || !bl) return make_error("round quality: a context to compare was not retained");
    auto q = compare_continuation(*lm.model, engine.kv(), *ex, *bl, cont, engine.pool(), own);
    if (!q.ok()) return q.status_error();
    TurnQuality& t = out[i];
    t.quality = std::move(*q);
    t.measured = true;
    const size_t cmp = std::min({size_t(greedy_tokens), o.answer.tokens.size(), greedy[i].tokens.size()});
    size_t same = 0;
    while (same < cmp && o.answer.tokens[same] == greedy[i].tokens[same]) ++same;
    t.greedy_agreement = cmp ? double(same) / double(cmp) : 1.0;
  }
  return out;
}

}  // namespace agentkv
