// The agents API's engine-thread jobs (server/kv_jobs.h): prefill, fork, release, and the turns of
// respond and rounds as collective-round jobs committed together across models.
#include "server/kv_jobs.h"

#include <algorithm>

#include "engine/request_outcome.h"
#include "server/error_status.h"
#include "server/mailbox.h"
#include "server/turn_builder.h"

namespace agentkv {

namespace {

Error shutting_down() { return Error{ErrorCode::kUnavailable, "the server is shutting down"}; }

// A kept context the client will not get: freed through a job.
std::function<void(Result<KeptContext>&)> dropper(EngineLoop& loop, size_t model) {
  return [&loop, model](Result<KeptContext>& r) {
    if (r.ok()) release_context(loop, model, r->handle);
  };
}

}  // namespace

void release_context(EngineLoop& loop, size_t model, uint64_t handle) {
  if (handle == 0) return;
  loop.post([handle](Engine& e) { e.release_retained(handle); }, model);
}

std::optional<Result<KeptContext>> prefill_context(EngineLoop& loop, size_t model, std::vector<int32_t> prompt,
                                                   HttpResponseWriter& w) {
  // max_tokens 0 is a prefill without sampling; retain_kv keeps the computed context.
  RequestParams p;
  p.prompt = std::move(prompt);
  p.max_tokens = 0;
  p.retain_kv = true;
  auto box = std::make_shared<Mailbox<Result<KeptContext>>>();
  auto outcome = std::make_shared<RequestOutcome>();  // the engine thread's alone
  auto id = loop.submit(std::move(p), [box, outcome](const RequestEvent& ev) {
    fold(*outcome, ev);
    if (!ev.request_finished) return;
    if (outcome->error) return box->put(*outcome->error);
    if (outcome->finish == FinishReason::kCancelled || !outcome->retained_kv)
      return box->put(Error{ErrorCode::kCancelled, "the prefill was cancelled"});
    box->put(KeptContext{outcome->retained_kv, outcome->retained_tokens, outcome->n_cached_prompt});
  }, model);
  if (!id.ok()) return Result<KeptContext>(id.status_error());
  return box->result(w, [&] { loop.cancel(*id, model); }, dropper(loop, model));
}

std::optional<Result<KeptContext>> fork_context(EngineLoop& loop, size_t model, uint64_t from, HttpResponseWriter& w) {
  auto box = std::make_shared<Mailbox<Result<KeptContext>>>();
  // 0 when the pool cannot rebuild a compact context: the child then starts without resident KV.
  const bool posted = loop.post([box, from](Engine& e) { box->put(KeptContext{e.fork_context(from), 0, 0}); }, model);
  if (!posted) return Result<KeptContext>(shutting_down());
  return box->result(w, nullptr, dropper(loop, model));
}

std::optional<Result<int64_t>> publish_context(EngineLoop& loop, size_t model, uint64_t handle, HttpResponseWriter& w) {
  auto box = std::make_shared<Mailbox<Result<int64_t>>>();
  const bool posted = loop.post(
      [box, handle](Engine& e) {
        const int64_t n = e.publish_retained(handle);
        if (n < 0) return box->put(Error{ErrorCode::kNotFound, "the agent's context is gone"});
        box->put(n);
      },
      model);
  if (!posted) return Result<int64_t>(shutting_down());
  return box->result(w, nullptr);
}

namespace {

// The round jobs of one run_turns call, one per model, committed together on the engine thread:
// every model's agents get their new contexts, or none does.
struct RoundBarrier {
  std::mutex mu;
  size_t left = 0;
  bool committed = false;
  std::vector<CollectiveRoundResult> results;    // per model of the round
  std::vector<Engine*> engines;
  std::vector<std::vector<uint64_t>> resumed;     // the contexts the turns resumed from
  std::vector<std::shared_ptr<CollectiveRound>> jobs;  // engine thread only
  Mailbox<bool> done;                             // the commit's verdict, once

  // Engine thread (or the HTTP thread for a job that never started: then there is no engine work).
  void arrive(size_t k, Engine* e, CollectiveRoundResult&& r, EngineLoop* loop, const std::vector<size_t>& models) {
    std::lock_guard<std::mutex> lock(mu);
    results[k] = std::move(r);
    engines[k] = e;
    if (--left > 0) return;
    committed = true;
    for (const CollectiveRoundResult& res : results) committed = committed && res.status.ok();
    for (size_t j = 0; j < results.size(); ++j)
      if (engines[j]) {
        finish_collective_round(*engines[j], results[j], resumed[j], committed);
        loop->publish_metrics(models[j]);
      }
    done.put(committed);
  }
};

}  // namespace

bool run_turns(ServerState& s, std::vector<Agent>& agents, const SamplingFields& gen, HttpResponseWriter& w,
               std::vector<TurnAnswer>* answers, std::optional<double> sharing, RoundSharingReport* report) {
  auto abandon_all = [&] {
    for (const Agent& a : agents) s.agents->abandon(a.id);
    return false;
  };
  std::vector<AgentTurn> turns(agents.size());
  for (size_t i = 0; i < agents.size(); ++i) {
    const ServedModel& m = s.models[agents[i].model];
    if (auto e = build_turn(agents[i], *m.lm->tokenizer, m.engine->n_ctx(), gen, s.opt.limits, &turns[i])) {
      reply(w, *e);
      return abandon_all();
    }
  }
  // One collective-round job per model: the HTTP thread only posts it and waits for its one result;
  // every KV handle is made, kept or released on the engine thread.
  std::vector<size_t> models;
  std::vector<std::vector<size_t>> members;
  for (size_t i = 0; i < agents.size(); ++i) {
    const size_t m = agents[i].model;
    const size_t k = size_t(std::find(models.begin(), models.end(), m) - models.begin());
    if (k == models.size()) {
      models.push_back(m);
      members.emplace_back();
    }
    members[k].push_back(i);
  }
  auto b = std::make_shared<RoundBarrier>();
  b->left = models.size();
  b->results.resize(models.size());
  b->engines.assign(models.size(), nullptr);
  b->resumed.resize(models.size());
  b->jobs.resize(models.size());
  EngineLoop* loop = s.loop.get();
  std::string gate_reason;
  for (size_t k = 0; k < models.size(); ++k) {
    const ServedModel& m = s.models[models[k]];
    std::vector<RoundTurn> round_turns;
    for (size_t i : members[k]) {
      round_turns.push_back(RoundTurn{turns[i].params, turns[i].segment});
      b->resumed[k].push_back(turns[i].params.kv_from);
    }
    CollectiveRoundOptions ro;
    ro.release_resumed = false;  // the barrier commits every model together
    if (sharing && m.sharing_allowed) {
      ro.recompute = *sharing;
    } else if (sharing) {
      ro.exact_reason = "model '" + m.id + "' failed its start-up quality gate (" + m.gate_summary + ")";
      if (gate_reason.empty()) gate_reason = ro.exact_reason;
    }
    const bool posted = loop->post(
        [b, k, loop, models, round_turns = std::move(round_turns), ro](Engine& e) mutable {
          b->jobs[k] = start_collective_round(e, std::move(round_turns), std::move(ro),
                                              [b, k, &e, loop, models](CollectiveRoundResult&& r) {
                                                b->arrive(k, &e, std::move(r), loop, models);
                                              });
        },
        models[k]);
    if (!posted) {  // shutting down: the loop drops every snapshot with its engines
      CollectiveRoundResult r;
      r.status = shutting_down();
      b->arrive(k, nullptr, std::move(r), loop, models);
    }
  }
  // A client gone: the jobs fail and release what they made; the barrier then commits nothing.
  auto cancel = [&] {
    for (size_t k = 0; k < models.size(); ++k)
      loop->post([b, k](Engine&) { if (b->jobs[k]) cancel_collective_round(*b->jobs[k]); }, models[k]);
  };
  const std::optional<bool> committed = b->done.result(w, cancel);
  std::lock_guard<std::mutex> lock(b->mu);
  if (!b->committed) {
    Error error{ErrorCode::kInternal, "the round failed"};
    for (const CollectiveRoundResult& r : b->results)
      if (!r.status.ok()) {
        error = r.status.status_error();
        break;
      }
    if (committed) reply(w, api_error(error));  // nullopt: the client is gone
    return abandon_all();
  }
  if (sharing && report) {
    RoundSharingReport rep;
    rep.recompute = *sharing;
    std::string first_reason;
    for (const CollectiveRoundResult& r : b->results) {
      const RoundSharingReport& sr = r.sharing;
      if (sr.mode == "tokendance") rep.mode = sr.mode;
      if (first_reason.empty()) first_reason = sr.reason;
      rep.agents += sr.agents;
      rep.segment_tokens = std::max(rep.segment_tokens, sr.segment_tokens);
      rep.recomputed_tokens += sr.recomputed_tokens;
      rep.master_tokens_computed += sr.master_tokens_computed;
      if (rep.master_context.empty()) rep.master_context = sr.master_context;
      else if (!sr.master_context.empty() && sr.master_context != rep.master_context) rep.master_context = "mixed";
      rep.collector_seconds += sr.collector_seconds;
      rep.waves = std::max(rep.waves, sr.waves);
    }
    // A model that failed its gate is the reason worth naming, whether or not another model shared.
    rep.reason = !gate_reason.empty() || rep.mode == "tokendance" ? gate_reason : first_reason;
    *report = rep;
  }
  answers->assign(agents.size(), TurnAnswer{});
  for (size_t k = 0; k < models.size(); ++k)
    for (size_t t = 0; t < members[k].size(); ++t) {
      const RoundTurnOutcome& o = b->results[k].turns[t];
      const size_t i = members[k][t];
      TurnAnswer& ans = (*answers)[i];
      ans.text = o.answer.text;
      ans.finish_reason = o.answer.finish;
      ans.usage.prompt_tokens = o.answer.n_prompt;
      ans.usage.cached_tokens = o.answer.n_cached_prompt;
      ans.usage.completion_tokens = o.answer.n_generated;
      Agent& a = agents[i];
      a.kv = o.answer.retained_kv;  // the barrier released the context it replaces
      a.kv_tokens = o.answer.retained_tokens;
      a.messages.push_back(ChatMessage{"assistant", o.answer.text});
      a.last_answer = o.answer.text;
      a.expires_at = unix_seconds() + a.ttl_s;
      s.agents->finish(a);
    }
  return true;
}

}  // namespace agentkv
