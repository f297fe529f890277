// The agents and rounds API of ApiServer: agents with resident (pinned) contexts, and all-gather
// rounds that run every listed agent's turn together on the engine.
#include <algorithm>
#include <chrono>
#include <future>
#include <random>

#include "server/agent_context.h"
#include "server/agent_job.h"
#include "server/turn_builder.h"
#include "engine/collective_round.h"

namespace agentkv {

namespace agents_http {

void reply(HttpResponseWriter& w, const ApiError& e) { w.respond(e.status, "application/json", error_json(e)); }

std::optional<Json> parse_body(const HttpRequest& req, HttpResponseWriter& w, bool empty_ok) {
  if (empty_ok && req.body.empty()) return Json::object();
  auto body = parse_json(req.body, 32);
  if (!body.ok()) {
    reply(w, ApiError{400, "malformed JSON body: " + body.error(), ""});
    return std::nullopt;
  }
  return std::move(body).value();
}

}  // namespace agents_http

using agents_http::parse_body;
using agents_http::reply;

void ApiServer::release_kv(size_t model, uint64_t handle) {
  if (handle == 0) return;
  loop_->post([handle](Engine& e) { e.release_retained(handle); }, model);
}

AgentView ApiServer::view(const Agent& a) const {
  AgentView v;
  v.id = a.id;
  v.name = a.name;
  v.model = models_[a.model].id;
  v.created = a.created;
  v.expires_at = a.expires_at;
  v.n_messages = a.messages.size();
  v.resident_tokens = a.kv_tokens;
  v.busy = a.busy;
  return v;
}

void ApiServer::sweep_agents_loop() {
  std::unique_lock<std::mutex> lock(sweep_mu_);
  while (!sweep_stop_) {
    sweep_cv_.wait_for(lock, std::chrono::seconds(1));
    if (sweep_stop_) break;
    lock.unlock();
    for (const Agent& a : agents_->take_expired(unix_seconds())) release_kv(a.model, a.kv);
    lock.lock();
  }
}

bool ApiServer::run_jobs(std::vector<AgentJob>& jobs, HttpResponseWriter& w) {
  struct Shared {
    std::mutex mu;
    std::condition_variable cv;
    size_t n_done = 0;
  };
  auto shared = std::make_shared<Shared>();
  // Outcomes are written by the engine thread under shared->mu and read here under it too.
  auto outcomes = std::make_shared<std::vector<RequestOutcome>>(jobs.size());
  for (size_t i = 0; i < jobs.size(); ++i) {
    AgentJob& j = jobs[i];
    auto id = loop_->submit(j.params, [shared, outcomes, i](const RequestEvent& ev) {
      std::lock_guard<std::mutex> lock(shared->mu);
      fold((*outcomes)[i], ev);
      if (ev.request_finished) {
        ++shared->n_done;
        shared->cv.notify_one();
      }
    }, j.model);
    if (!id.ok()) {
      std::lock_guard<std::mutex> lock(shared->mu);
      (*outcomes)[i].error = id.status_error();
      (*outcomes)[i].finish = FinishReason::kError;
      (*outcomes)[i].request_finished = true;
      ++shared->n_done;
    } else {
      j.id = *id;
    }
  }
  for (;;) {
    std::unique_lock<std::mutex> lock(shared->mu);
    shared->cv.wait_for(lock, std::chrono::milliseconds(200), [&] { return shared->n_done == jobs.size(); });
    if (shared->n_done == jobs.size()) break;
    lock.unlock();
    if (w.client_gone()) {
      for (AgentJob& j : jobs)
        if (j.id) loop_->cancel(j.id, j.model);
      // Wait for the cancellations, then give back what finished before them.
      std::unique_lock<std::mutex> relock(shared->mu);
      shared->cv.wait(relock, [&] { return shared->n_done == jobs.size(); });
      for (size_t i = 0; i < jobs.size(); ++i) release_kv(jobs[i].model, (*outcomes)[i].retained_kv);
      return false;
    }
  }
  std::lock_guard<std::mutex> lock(shared->mu);
  for (size_t i = 0; i < jobs.size(); ++i) {
    RequestOutcome& o = (*outcomes)[i];
    jobs[i].text = std::move(o.text);
    jobs[i].finish_reason = o.finish;
    jobs[i].usage.prompt_tokens = o.n_prompt;
    jobs[i].usage.cached_tokens = o.n_cached_prompt;
    jobs[i].usage.completion_tokens = o.n_generated;
    jobs[i].retained = o.retained_kv;
    jobs[i].retained_tokens = o.retained_tokens;
    if (o.error) {
      jobs[i].error = o.error->message;
      jobs[i].error_code = o.error->code;
    }
    jobs[i].done = o.request_finished;
  }
  return true;
}

bool ApiServer::prepare_turn(const Agent& a, const SamplingFields& gen, HttpResponseWriter& w, AgentJob* job) {
  const Served& m = models_[a.model];
  AgentTurn t;
  if (auto e = build_turn(a, *m.lm->tokenizer, m.engine->n_ctx(), gen, opt_.limits, &t)) {
    reply(w, *e);
    return false;
  }
  job->params = std::move(t.params);
  job->segment = t.segment;
  job->model = a.model;
  return true;
}

namespace {

// The round jobs of one run_turns call, one per model, committed together on the engine thread:
// every model's agents get their new contexts, or none does.
struct RoundBarrier {
  std::mutex mu;
  std::condition_variable cv;
  size_t left = 0;
  bool done = false, committed = false;
  std::vector<CollectiveRoundResult> results;    // per model of the round
  std::vector<Engine*> engines;
  std::vector<std::vector<uint64_t>> resumed;     // the contexts the turns resumed from
  std::vector<std::shared_ptr<CollectiveRound>> jobs;  // engine thread only

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
    done = true;
    cv.notify_all();
  }
};

}  // namespace

bool ApiServer::run_turns(std::vector<Agent>& agents, const SamplingFields& gen, HttpResponseWriter& w,
                          std::vector<AgentJob>* jobs, std::optional<double> sharing, RoundSharingReport* report) {
  auto abandon_all = [&] {
    for (const Agent& a : agents) agents_->abandon(a.id);
    return false;
  };
  jobs->assign(agents.size(), AgentJob{});
  for (size_t i = 0; i < agents.size(); ++i)
    if (!prepare_turn(agents[i], gen, w, &(*jobs)[i])) return abandon_all();
  // One collective-round job per model (engine/collective_round.h): the HTTP thread only posts it
  // and waits for its one result; every KV handle is made, kept or released on the engine thread.
  std::vector<size_t> models;
  std::vector<std::vector<size_t>> members;
  for (size_t i = 0; i < jobs->size(); ++i) {
    const size_t m = (*jobs)[i].model;
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
  EngineLoop* loop = loop_.get();
  std::string gate_reason;
  for (size_t k = 0; k < models.size(); ++k) {
    std::vector<RoundTurn> turns;
    for (size_t i : members[k]) {
      turns.push_back(RoundTurn{(*jobs)[i].params, (*jobs)[i].segment});
      b->resumed[k].push_back((*jobs)[i].params.kv_from);
    }
    CollectiveRoundOptions ro;
    ro.release_resumed = false;  // the barrier commits every model together
    if (sharing && models_[models[k]].sharing_allowed) {
      ro.recompute = *sharing;
    } else if (sharing) {
      ro.exact_reason = "model '" + models_[models[k]].id + "' failed its start-up quality gate (" +
                        models_[models[k]].gate_summary + ")";
      if (gate_reason.empty()) gate_reason = ro.exact_reason;
    }
    const bool posted = loop_->post(
        [b, k, loop, models, turns = std::move(turns), ro](Engine& e) mutable {
          b->jobs[k] = start_collective_round(e, std::move(turns), std::move(ro),
                                              [b, k, &e, loop, models](CollectiveRoundResult&& r) {
                                                b->arrive(k, &e, std::move(r), loop, models);
                                              });
        },
        models[k]);
    if (!posted) {  // shutting down: the loop drops every snapshot with its engines
      CollectiveRoundResult r;
      r.status = make_error(ErrorCode::kUnavailable, "the server is shutting down");
      b->arrive(k, nullptr, std::move(r), loop, models);
    }
  }
  bool cancelled = false;
  for (;;) {
    std::unique_lock<std::mutex> lock(b->mu);
    b->cv.wait_for(lock, std::chrono::milliseconds(200), [&] { return b->done; });
    if (b->done) break;
    lock.unlock();
    if (!cancelled && w.client_gone()) {
      cancelled = true;  // the jobs fail and release what they made; the barrier then commits nothing
      for (size_t k = 0; k < models.size(); ++k)
        loop_->post([b, k](Engine&) { if (b->jobs[k]) cancel_collective_round(*b->jobs[k]); }, models[k]);
    }
  }
  std::lock_guard<std::mutex> lock(b->mu);
  if (!b->committed) {
    Error error{ErrorCode::kInternal, "the round failed"};
    for (const CollectiveRoundResult& r : b->results)
      if (!r.status.ok()) {
        error = r.status.status_error();
        break;
      }
    if (!cancelled) reply(w, api_error(error));
    return abandon_all();
  }
  if (sharing && report) {
    RoundSharingReport rep;
    rep.recompute = *sharing;
    std::string first_reason;
    for (const CollectiveRoundResult& r : b->results) {
      const RoundSharingReport& s = r.sharing;
      if (s.mode == "tokendance") rep.mode = s.mode;
      if (first_reason.empty()) first_reason = s.reason;
      rep.agents += s.agents;
      rep.segment_tokens = std::max(rep.segment_tokens, s.segment_tokens);
      rep.recomputed_tokens += s.recomputed_tokens;
      rep.collector_seconds += s.collector_seconds;
    }
    // A model that failed its gate is the reason worth naming, whether or not another model shared.
    rep.reason = !gate_reason.empty() || rep.mode == "tokendance" ? gate_reason : first_reason;
    *report = rep;
  }
  for (size_t k = 0; k < models.size(); ++k)
    for (size_t t = 0; t < members[k].size(); ++t) {
      const RoundTurnOutcome& o = b->results[k].turns[t];
      AgentJob& j = (*jobs)[members[k][t]];
      j.text = o.text;
      j.finish_reason = o.finish_reason;
      j.usage.prompt_tokens = o.n_prompt;
      j.usage.cached_tokens = o.n_cached_prompt;
      j.usage.completion_tokens = o.n_generated;
      j.retained = o.context;
      j.retained_tokens = o.context_tokens;
    }
  for (size_t i = 0; i < agents.size(); ++i) {
    Agent& a = agents[i];
    const AgentJob& j = (*jobs)[i];
    a.kv = j.retained;  // the barrier released the context it replaces
    a.kv_tokens = j.retained_tokens;
    a.messages.push_back(ChatMessage{"assistant", j.text});
    a.last_answer = j.text;
    a.expires_at = unix_seconds() + a.ttl_s;
    agents_->finish(a);
  }
  return true;
}

void ApiServer::handle_agents(const HttpRequest& req, HttpResponseWriter& w) {
  const std::string& path = req.path;
  if (path == "/v1/agents") {
    if (req.method == "POST") return create_agent(req, w);
    if (req.method != "GET") return reply(w, ApiError{405, "use GET or POST /v1/agents", ""});
    Json data = Json::array();
    for (const Agent& a : agents_->list()) data.push_back(agent_json(view(a)));
    Json out = Json::object();
    out["object"] = "list";
    out["data"] = std::move(data);
    w.respond(200, "application/json", dump_json(out));
    return;
  }
  std::string rest = path.substr(std::string("/v1/agents/").size());
  std::string action;
  if (const size_t slash = rest.find('/'); slash != std::string::npos) {
    action = rest.substr(slash + 1);
    rest = rest.substr(0, slash);
  }
  const std::string& id = rest;
  if (id.empty()) return reply(w, api_error(ErrorCode::kNotFound, "no route for " + req.method + " " + path));
  if (action.empty()) {
    if (req.method == "DELETE") return delete_agent(id, w);
    if (req.method != "GET") return reply(w, ApiError{405, "use GET or DELETE /v1/agents/{id}", ""});
    auto a = agents_->get(id);
    if (!a) return reply(w, api_error(ErrorCode::kNotFound, "agent '" + id + "' does not exist (deleted or expired?)", "agent"));
    w.respond(200, "application/json", dump_json(agent_json(view(*a))));
    return;
  }
  if (action != "respond" && action != "messages" && action != "fork" && action != "score")
    return reply(w, api_error(ErrorCode::kNotFound, "no route for " + req.method + " " + path));
  if (req.method != "POST") return reply(w, ApiError{405, "use POST " + path, ""});
  if (action == "respond") return respond_agent(id, req, w);
  if (action == "messages") return append_messages(id, req, w);
  if (action == "score") return score_agent_steps(id, req, w);
  return fork_agent(id, req, w);
}

void ApiServer::create_agent(const HttpRequest& req, HttpResponseWriter& w) {
  auto body = parse_body(req, w, false);
  if (!body) return;
  AgentCreateRequest cr;
  if (auto e = parse_agent_create(*body, opt_.limits, opt_.agent_limits, &cr)) return reply(w, *e);
  const int mi = find_model(cr.model);
  if (mi < 0)
    return reply(w, api_error(ErrorCode::kNotFound, "model '" + cr.model + "' does not exist (GET /v1/models lists them)",
                              "model"));
  if (agents_->size() >= opt_.agent_limits.max_agents)
    return reply(w, api_error(ErrorCode::kLimitReached, "the server holds its maximum of " +
                                                            std::to_string(opt_.agent_limits.max_agents) +
                                                            " agents; delete some"));
  Agent a;
  a.name = cr.name;
  a.model = size_t(mi);
  a.messages = std::move(cr.messages);
  a.created = int64_t(unix_seconds());
  a.ttl_s = cr.ttl_s;
  if (cr.prefill && !a.messages.empty()) {
    // Compute the context now and keep it: max_tokens 0 is a prefill without sampling.
    const Served& m = models_[a.model];
    auto tokens = agent_context_tokens(*m.lm->tokenizer, a.messages, a.segments, false);
    if (!tokens.ok()) return reply(w, api_error(tokens.status_error(), "messages"));
    if (Status st = check_context(int64_t(tokens->size()), m.engine->n_ctx(), "the agent's context"); !st.ok())
      return reply(w, api_error(st.status_error(), "messages"));
    std::vector<AgentJob> jobs(1);
    jobs[0].model = a.model;
    jobs[0].params.prompt = std::move(*tokens);
    jobs[0].params.max_tokens = 0;
    jobs[0].params.retain_kv = true;
    if (!run_jobs(jobs, w)) return;
    if (!jobs[0].error.empty()) return reply(w, api_error(jobs[0].error_code, jobs[0].error));
    a.kv = jobs[0].retained;
    a.kv_tokens = jobs[0].retained_tokens;
  }
  a.expires_at = unix_seconds() + a.ttl_s;
  if (auto e = agents_->add(&a)) {
    release_kv(a.model, a.kv);
    return reply(w, *e);
  }
  w.respond(201, "application/json", dump_json(agent_json(view(a))));
}

void ApiServer::append_messages(const std::string& id, const HttpRequest& req, HttpResponseWriter& w) {
  auto body = parse_body(req, w, false);
  if (!body) return;
  std::vector<ChatMessage> msgs;
  if (auto e = parse_agent_messages(*body, opt_.limits, &msgs)) return reply(w, *e);
  std::vector<Agent> as;
  if (auto e = agents_->acquire({id}, &as)) return reply(w, *e);
  Agent& a = as[0];
  a.messages.insert(a.messages.end(), msgs.begin(), msgs.end());
  a.expires_at = unix_seconds() + a.ttl_s;
  agents_->finish(a);
  w.respond(200, "application/json", dump_json(agent_json(view(a))));
}

void ApiServer::respond_agent(const std::string& id, const HttpRequest& req, HttpResponseWriter& w) {
  auto body = parse_body(req, w, true);
  if (!body) return;
  AgentRespondRequest rr;
  if (auto e = parse_agent_respond(*body, opt_.limits, &rr)) return reply(w, *e);
  std::vector<Agent> as;
  if (auto e = agents_->acquire({id}, &as)) return reply(w, *e);
  as[0].messages.insert(as[0].messages.end(), rr.messages.begin(), rr.messages.end());
  std::vector<AgentJob> jobs;
  if (!run_turns(as, rr.gen, w, &jobs)) return;
  const Agent& a = as[0];
  const AgentJob& j = jobs[0];
  AgentAnswer ans{a.id, a.name, j.text, openai_finish_reason(j.finish_reason), j.usage};
  Json out = agent_answer_json(ans);
  out["object"] = "agent.response";
  w.respond(200, "application/json", dump_json(out));
}

void ApiServer::fork_agent(const std::string& id, const HttpRequest& req, HttpResponseWriter& w) {
  auto body = parse_body(req, w, true);
  if (!body) return;
  AgentForkRequest fr;
  if (auto e = parse_agent_fork(*body, opt_.agent_limits, &fr)) return reply(w, *e);
  std::vector<Agent> as;
  if (auto e = agents_->acquire({id}, &as)) return reply(w, *e);
  Agent parent = as[0];
  Agent child = parent;
  child.name = fr.name;
  child.ttl_s = fr.ttl_s ? *fr.ttl_s : parent.ttl_s;
  child.created = int64_t(unix_seconds());
  child.kv = 0;
  if (parent.kv) {
    // The child shares every block of the parent's context; the engine thread owns the snapshots.
    auto forked = std::make_shared<std::promise<uint64_t>>();
    std::future<uint64_t> handle = forked->get_future();
    const uint64_t from = parent.kv;
    if (!loop_->post([forked, from](Engine& e) { forked->set_value(e.fork_retained(from)); }, parent.model)) {
      agents_->abandon(id);
      return reply(w, api_error(ErrorCode::kUnavailable, "the server is shutting down"));
    }
    child.kv = handle.get();
  }
  parent.expires_at = unix_seconds() + parent.ttl_s;
  agents_->finish(parent);
  child.expires_at = unix_seconds() + child.ttl_s;
  if (auto e = agents_->add(&child)) {
    release_kv(child.model, child.kv);
    return reply(w, *e);
  }
  w.respond(201, "application/json", dump_json(agent_json(view(child))));
}

void ApiServer::delete_agent(const std::string& id, HttpResponseWriter& w) {
  Agent a;
  if (auto e = agents_->remove(id, &a)) return reply(w, *e);
  release_kv(a.model, a.kv);
  Json out = Json::object();
  out["id"] = id;
  out["object"] = "agent.deleted";
  out["deleted"] = true;
  w.respond(200, "application/json", dump_json(out));
}

void ApiServer::handle_round(const HttpRequest& req, HttpResponseWriter& w) {
  auto body = parse_body(req, w, false);
  if (!body) return;
  RoundRequest rr;
  if (auto e = parse_round(*body, opt_.limits, opt_.agent_limits, &rr)) return reply(w, *e);
  std::vector<Agent> as;
  if (auto e = agents_->acquire(rr.agents, &as)) return reply(w, *e);
  auto abandon_all = [&] {
    for (const Agent& a : as) agents_->abandon(a.id);
  };
  // The shared block: the caller's text, or every listed agent's last answer (all-gather).
  std::string shared;
  if (rr.shared) {
    shared = *rr.shared;
  } else {
    for (const Agent& a : as)
      if (!a.last_answer.empty()) shared += a.name + ": " + a.last_answer + "\n";
    if (shared.empty()) {
      abandon_all();
      return reply(w, api_error(ErrorCode::kInvalidArgument,
                                "no agent in the round has answered yet: give 'shared' text for the first round", "shared"));
    }
    shared.pop_back();
  }
  std::string content = shared;
  if (!rr.instruction.empty()) content += (content.empty() ? "" : "\n\n") + rr.instruction;
  if (content.empty()) {
    abandon_all();
    return reply(w, api_error(ErrorCode::kInvalidArgument, "the round's message is empty: give 'shared' or 'instruction'",
                              "shared"));
  }
  for (Agent& a : as) {
    a.messages.push_back(ChatMessage{"user", content});
    if (!shared.empty()) a.segments.push_back(shared);
  }
  std::vector<AgentJob> jobs;
  RoundSharingReport sharing;
  std::optional<double> recompute;
  if (!opt_.round_sharing) sharing.reason = "KV sharing is off on this server (serve --round-sharing off)";
  else if (!rr.kv_sharing.value_or(true)) sharing.reason = "kv_sharing is false";
  else recompute = rr.recompute.value_or(opt_.recompute);
  if (!run_turns(as, rr.gen, w, &jobs, recompute, &sharing)) return;
  Json answers = Json::array();
  UsageCounts total;
  for (size_t i = 0; i < as.size(); ++i) {
    const Agent& a = as[i];
    const AgentJob& j = jobs[i];
    answers.push_back(agent_answer_json(AgentAnswer{a.id, a.name, j.text, openai_finish_reason(j.finish_reason), j.usage}));
    total.prompt_tokens += j.usage.prompt_tokens;
    total.completion_tokens += j.usage.completion_tokens;
    total.cached_tokens += j.usage.cached_tokens;
  }
  Json out = Json::object();
  out["object"] = "round";
  out["shared"] = shared;
  out["answers"] = std::move(answers);
  out["usage"] = total;
  out["kv_sharing"] = round_sharing_json(sharing);
  w.respond(200, "application/json", dump_json(out));
}

}  // namespace agentkv
