// The exact baseline of a collective round (engine/round_quality.h).
#include "engine/round_quality.h"

#include <algorithm>

#include "engine/request_outcome.h"

namespace agentkv {

namespace {

struct Done {
  uint64_t retained = 0;
  std::vector<int32_t> tokens;
  std::string error;
};

Status submit(Engine& e, RequestParams p, Done* d) {
  auto id = e.add_request(std::move(p), [d](const RequestEvent& ev) {
    if (answer_token(ev)) d->tokens.push_back(ev.token);
    if (!ev.error.empty()) d->error = ev.error;
    if (ev.request_finished) d->retained = ev.retained_kv;
  });
  return id.ok() ? Status{} : make_error(id.error());
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
  std::vector<Done> exact(n), greedy(n);
  struct Release {
    Engine& e;
    std::vector<Done>& d;
    ~Release() {
      for (const Done& x : d) e.release_retained(x.retained);
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
    if (!exact[i].error.empty()) return make_error(exact[i].error);
    RequestParams p = turns[i].params;
    p.max_tokens = greedy_tokens;
    p.min_tokens = std::min(turns[i].params.min_tokens, greedy_tokens);
    p.kv_from = exact[i].retained;
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
    const KvSequence* ex = engine.retained(exact[i].retained);
    const KvSequence* bl = engine.retained(o.blended);
    if (!ex || !bl) return make_error("round quality: a context to compare was not retained");
    auto q = compare_continuation(*lm.model, engine.kv(), *ex, *bl, cont, engine.pool(), own);
    if (!q.ok()) return make_error(q.error());
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
