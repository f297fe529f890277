// The agents routes: agents with resident (pinned) contexts.
//   POST /v1/agents (create, by default prefilled), GET /v1/agents, GET / DELETE /v1/agents/{id},
//   POST /v1/agents/{id}/messages, /respond, /fork; /score is in score_routes.cpp; migration:
//   GET /v1/agents/{id}/export, POST /v1/agents/import; to another model: POST /v1/agents/{id}/transfer.
// Their KV work (prefill, fork, a turn, release) is one engine job each (server/kv_jobs.h).
#include <chrono>

#include "server/agent_context.h"
#include "server/error_status.h"
#include "server/kv_jobs.h"
#include "server/routes.h"
#include "server/transfer_job.h"

namespace agentkv {

namespace {

// An agent's conversation must stay within the per-agent text limit and fit its model's context
// (else it could never answer): checked when it grows, 413 naming the limit. A history whose bytes
// alone need more tokens than the context (Tokenizer::min_tokens) is refused before tokenizing;
// with `exact` it is then tokenized, work bounded by the context rather than the history.
std::optional<ApiError> check_history(const ServerState& s, const Agent& a, bool exact) {
  const size_t bytes = agent_text_bytes(a), limit = s.opt.agent_limits.max_agent_text_bytes;
  if (bytes > limit)
    return api_error(ErrorCode::kTooLarge, "the agent's messages would hold " + std::to_string(bytes) +
                                               " bytes, over the limit of " + std::to_string(limit) + " per agent",
                     "messages");
  const ServedModel& m = s.models[a.model];
  const int n_ctx = m.engine->n_ctx();
  size_t rendered = 0;  // bytes every rendering holds: each content, trimmed (templates may trim)
  for (const ChatMessage& msg : a.messages) {
    const size_t b = msg.content.find_first_not_of(" \t\n\r\f\v");
    if (b != std::string::npos) rendered += msg.content.find_last_not_of(" \t\n\r\f\v") + 1 - b;
  }
  if (const int64_t least = m.lm->tokenizer->min_tokens(rendered); least >= n_ctx)
    return api_error(ErrorCode::kTooLarge, "the agent's context has at least " + std::to_string(least) +
                                               " tokens; the model's context is " + std::to_string(n_ctx),
                     "messages");
  if (!exact) return std::nullopt;
  auto tokens = agent_context_tokens(*m.lm->tokenizer, a.messages, a.segments, true);
  if (!tokens.ok()) return api_error(tokens.status_error(), "messages");
  if (Status st = check_context(int64_t(tokens->size()), n_ctx, "the agent's context"); !st.ok())
    return api_error(st.status_error(), "messages");
  return std::nullopt;
}

// A new agent of `model` (its id comes from the registry): false, and replied 404 / 429, when the
// model is not served or the server holds its maximum of agents.
bool new_agent(ServerState& s, const std::string& model, HttpResponseWriter& w, Agent* a) {
  const int mi = s.find_model(model);
  if (mi < 0) {
    reply(w, unknown_model(model));
    return false;
  }
  if (s.agents->size() >= s.opt.agent_limits.max_agents) {
    reply(w, api_error(ErrorCode::kLimitReached, "the server holds its maximum of " +
                                                     std::to_string(s.opt.agent_limits.max_agents) + " agents; delete some"));
    return false;
  }
  a->model = size_t(mi);
  a->created = int64_t(unix_seconds());
  return true;
}

// Checks the agent's history and, with `prefill` (and messages), computes its context now and keeps
// it (every block in RAM or a KV tier restored instead of computed). False when replied (an error) or
// the client went away; `kept` gets the context's token counts.
bool make_context(ServerState& s, bool prefill, HttpResponseWriter& w, Agent* a, KeptContext* kept_out = nullptr) {
  if (auto e = check_history(s, *a, !prefill)) {
    reply(w, *e);
    return false;
  }
  if (!prefill || a->messages.empty()) return true;
  const ServedModel& m = s.models[a->model];
  auto tokens = agent_context_tokens(*m.lm->tokenizer, a->messages, a->segments, false);
  if (!tokens.ok()) {
    reply(w, api_error(tokens.status_error(), "messages"));
    return false;
  }
  if (Status st = check_context(int64_t(tokens->size()), m.engine->n_ctx(), "the agent's context"); !st.ok()) {
    reply(w, api_error(st.status_error(), "messages"));
    return false;
  }
  auto kept = prefill_context(*s.loop, a->model, std::move(*tokens), w);
  if (!kept) return false;  // the client went away
  if (!kept->ok()) {
    reply(w, api_error(kept->status_error()));
    return false;
  }
  a->kv = (*kept)->handle;
  a->kv_tokens = (*kept)->tokens;
  if (kept_out) *kept_out = **kept;
  return true;
}

// Stores the new agent (its expiry from now): false, its context released and the error replied, when
// the registry refuses it.
bool register_agent(ServerState& s, HttpResponseWriter& w, Agent* a) {
  a->expires_at = unix_seconds() + a->ttl_s;
  if (auto e = s.agents->add(a)) {
    release_context(*s.loop, a->model, a->kv);
    reply(w, *e);
    return false;
  }
  return true;
}

void create_agent(ServerState& s, const HttpRequest& req, HttpResponseWriter& w) {
  auto body = parse_body(req, w, false);
  if (!body) return;
  AgentCreateRequest cr;
  if (auto e = parse_agent_create(*body, s.opt.limits, s.opt.agent_limits, &cr)) return reply(w, *e);
  Agent a;
  if (!new_agent(s, cr.model, w, &a)) return;
  a.name = cr.name;
  a.messages = std::move(cr.messages);
  a.ttl_s = cr.ttl_s;
  if (!make_context(s, cr.prefill, w, &a)) return;
  if (!register_agent(s, w, &a)) return;
  w.respond(201, "application/json", dump_json(agent_json(s.view(a))));
}

void append_messages(ServerState& s, const std::string& id, const HttpRequest& req, HttpResponseWriter& w) {
  auto body = parse_body(req, w, false);
  if (!body) return;
  std::vector<ChatMessage> msgs;
  if (auto e = parse_agent_messages(*body, s.opt.limits, &msgs)) return reply(w, *e);
  std::vector<Agent> as;
  if (auto e = s.agents->acquire({id}, &as)) return reply(w, *e);
  Agent& a = as[0];
  a.messages.insert(a.messages.end(), msgs.begin(), msgs.end());
  if (auto e = check_history(s, a, true)) {
    s.agents->abandon(id);
    return reply(w, *e);
  }
  a.expires_at = unix_seconds() + a.ttl_s;
  if (auto e = s.agents->finish_grown(a)) return reply(w, *e);
  a.busy = false;  // finished: the reply shows the agent as the registry now holds it, idle
  w.respond(200, "application/json", dump_json(agent_json(s.view(a))));
}

void respond_agent(ServerState& s, const std::string& id, const HttpRequest& req, HttpResponseWriter& w) {
  auto body = parse_body(req, w, true);
  if (!body) return;
  AgentRespondRequest rr;
  if (auto e = parse_agent_respond(*body, s.opt.limits, &rr)) return reply(w, *e);
  std::vector<Agent> as;
  if (auto e = s.agents->acquire({id}, &as)) return reply(w, *e);
  as[0].messages.insert(as[0].messages.end(), rr.messages.begin(), rr.messages.end());
  if (auto e = check_history(s, as[0], false)) {  // run_turns tokenizes what passes this
    s.agents->abandon(id);
    return reply(w, *e);
  }
  std::vector<TurnAnswer> answers;
  if (!run_turns(s, as, rr.gen, w, &answers)) return;
  const Agent& a = as[0];
  const TurnAnswer& t = answers[0];
  Json out = agent_answer_json(AgentAnswer{a.id, a.name, t.text, openai_finish_reason(t.finish_reason), t.usage});
  out["object"] = "agent.response";
  w.respond(200, "application/json", dump_json(out));
}

void fork_agent(ServerState& s, const std::string& id, const HttpRequest& req, HttpResponseWriter& w) {
  auto body = parse_body(req, w, true);
  if (!body) return;
  AgentForkRequest fr;
  if (auto e = parse_agent_fork(*body, s.opt.agent_limits, &fr)) return reply(w, *e);
  std::vector<Agent> as;
  if (auto e = s.agents->acquire({id}, &as)) return reply(w, *e);
  Agent parent = as[0];
  Agent child = parent;
  child.name = fr.name;
  child.ttl_s = fr.ttl_s ? *fr.ttl_s : parent.ttl_s;
  child.created = int64_t(unix_seconds());
  child.kv = 0;
  if (parent.kv) {
    // The child shares every block of the parent's context; the engine thread owns the snapshots.
    auto forked = fork_context(*s.loop, parent.model, parent.kv, w);
    if (!forked || !forked->ok()) {
      s.agents->abandon(id);
      if (forked) reply(w, api_error(forked->status_error()));
      return;
    }
    child.kv = (*forked)->handle;
  }
  parent.expires_at = unix_seconds() + parent.ttl_s;
  s.agents->finish(parent);
  child.expires_at = unix_seconds() + child.ttl_s;
  if (auto e = s.agents->add(&child)) {
    release_context(*s.loop, child.model, child.kv);
    return reply(w, *e);
  }
  w.respond(201, "application/json", dump_json(agent_json(s.view(child))));
}

// Agent migration, the exporting side: the agent's conversation as a document (its KV stays here and
// goes to the shared tier, where another server restores it from). The agent is not changed: the
// client deletes it here once the import on the other server succeeded.
void export_agent(ServerState& s, const std::string& id, HttpResponseWriter& w) {
  std::vector<Agent> as;
  if (auto e = s.agents->acquire({id}, &as)) return reply(w, *e);
  const Agent& a = as[0];
  AgentExport ex;
  ex.id = a.id;
  ex.name = a.name;
  ex.model = s.models[a.model].id;
  ex.messages = a.messages;
  ex.segments = a.segments;
  ex.last_answer = a.last_answer;
  ex.ttl_s = a.ttl_s;
  ex.resident_tokens = a.kv ? a.kv_tokens : 0;
  if (a.kv) {
    // Every exact block was written to the shared tier when it was computed; queued again here (a
    // record written once stays) in case one was dropped or has expired, and waited for, so that the
    // import that follows finds them.
    auto published = publish_context(*s.loop, a.model, a.kv, w);
    if (!published || !published->ok()) {
      s.agents->abandon(id);
      if (published) reply(w, api_error(published->status_error()));
      return;
    }
    ex.published_blocks = **published;
    if (ex.published_blocks > 0)
      ex.published = s.models[a.model].engine->kv().flush_shared_tiers(std::chrono::seconds(10));
  }
  s.agents->abandon(id);
  w.respond(200, "application/json", dump_json(agent_export_json(ex)));
}

// Agent migration, the importing side: the exported agent as a new agent here. Its context is
// computed the way a prefilled create computes it: every exact block the shared tier holds is
// restored instead of computed.
void import_agent(ServerState& s, const HttpRequest& req, HttpResponseWriter& w) {
  auto body = parse_body(req, w, false);
  if (!body) return;
  AgentExport ex;
  if (auto e = parse_agent_import(*body, s.opt.limits, s.opt.agent_limits, &ex)) return reply(w, *e);
  Agent a;
  if (!new_agent(s, ex.model, w, &a)) return;
  a.name = ex.name;
  a.messages = std::move(ex.messages);
  a.segments = std::move(ex.segments);
  a.last_answer = std::move(ex.last_answer);
  a.ttl_s = ex.ttl_s;
  KeptContext kept_ctx;
  if (!make_context(s, ex.resident_tokens > 0, w, &a, &kept_ctx)) return;
  if (!register_agent(s, w, &a)) return;
  Json out = agent_json(s.view(a));
  out["imported_from"] = ex.id;
  out["usage"] = {{"context_tokens", kept_ctx.tokens},
                  {"cached_tokens", kept_ctx.cached_tokens},
                  {"computed_tokens", kept_ctx.tokens - kept_ctx.cached_tokens}};
  w.respond(201, "application/json", dump_json(out));
}

// A new agent on another model whose resident context is this agent's, transferred through a fitted
// map (server/transfer_job.h); the agent itself is not changed.
void transfer_agent(ServerState& s, const std::string& id, const HttpRequest& req, HttpResponseWriter& w) {
  auto body = parse_body(req, w, false);
  if (!body) return;
  AgentTransferRequest tr;
  if (auto e = parse_agent_transfer(*body, &tr)) return reply(w, *e);
  std::vector<Agent> as;
  if (auto e = s.agents->acquire({id}, &as)) return reply(w, *e);
  const Agent& from = as[0];
  auto refuse = [&](const ApiError& e) {
    s.agents->abandon(id);
    reply(w, e);
  };
  const std::string& from_model = s.models[from.model].id;
  const int to = s.find_model(tr.model);
  if (to < 0) return refuse(unknown_model(tr.model));
  if (size_t(to) == from.model)
    return refuse(bad_request("model", "agent '" + excerpt(id) + "' runs on " + from_model +
                                           " already; a transfer goes to another served model"));
  const ServedTransferMap* map = s.find_transfer_map(from.model, size_t(to));
  if (!map)
    return refuse(bad_request("model", "no transfer map loaded for " + from_model + " -> " + s.models[size_t(to)].id +
                                           " (serve --transfer-map FILE, fitted by agentkv fit-transfer --from " +
                                           from_model + " --to " + s.models[size_t(to)].id + ")"));
  choose_default_hybrid(&tr, !map->map.receiver_token_counts.empty());
  if (tr.rare_share > 0 && map->map.receiver_token_counts.empty())
    return refuse(bad_request("rare_share", "the transfer map for " + from_model + " -> " + s.models[size_t(to)].id +
                                                " was fitted before maps kept their fitting text's token counts, which "
                                                "'rare_share' ranks by; refit it with agentkv fit-transfer"));
  if (tr.rare_share > 0 && tr.recompute > 0)
    return refuse(bad_request("rare_share", "'rare_share' and 'recompute' (by deviation) do not combine; ask for one"));
  if (!from.kv)
    return refuse(api_error(ErrorCode::kConflict, "agent '" + excerpt(id) +
                                                      "' has no resident context to transfer (created with prefill "
                                                      "false, or without messages)"));
  Agent a;
  if (!new_agent(s, tr.model, w, &a)) return s.agents->abandon(id);
  a.name = tr.name;
  a.messages = from.messages;
  a.segments = from.segments;
  a.last_answer = from.last_answer;
  a.ttl_s = from.ttl_s;
  if (auto e = check_history(s, a, false)) return refuse(*e);
  const ServedModel& m = s.models[a.model];
  auto aligned = align_chat_contexts(*s.models[from.model].lm->tokenizer, *m.lm->tokenizer, a.messages, a.segments);
  if (!aligned.ok()) return refuse(api_error(aligned.status_error(), "messages"));
  if (Status st = check_context(int64_t(aligned->receiver.size()), m.engine->n_ctx(), "the agent's context"); !st.ok())
    return refuse(api_error(st.status_error(), "messages"));
  auto done = transfer_context(s, ContextTransfer{map, from.kv, std::move(aligned).value(), tr.native_last, tr.recompute, tr.native_share,
                                             tr.rare_share, tr.rare_max_tokens}, w);
  s.agents->abandon(id);  // read only
  if (!done) return;      // the client went away
  if (!done->ok()) return reply(w, api_error(done->status_error()));
  const TransferredContext& t = **done;
  a.kv = t.kept.handle;
  a.kv_tokens = t.kept.tokens;
  if (!register_agent(s, w, &a)) return;
  TransferSummary sum;
  sum.method = t.report.n_suffix > 0 || t.report.check_layers > 0 || t.report.n_recomputed > 0 ? "hybrid" : "transfer";
  sum.from_model = from_model;
  sum.context_tokens = t.report.n_receiver_tokens;
  sum.sender_tokens = t.sender_tokens;
  sum.transferred_tokens = t.report.n_projected;
  sum.native_tokens = t.report.n_native;
  sum.native_last = tr.native_last;
  sum.native_share = tr.native_share;
  sum.recompute = tr.recompute;
  sum.rare_share = tr.rare_share;
  sum.rare_max_tokens = tr.rare_max_tokens;
  sum.recomputed_tokens = t.report.n_recomputed;
  sum.check_layers = t.report.check_layers;
  sum.native_work = native_work_share(t.report, s.models[a.model].lm->config().n_layer);
  sum.seconds = t.seconds;
  sum.native_prefill_seconds_estimate = t.native_prefill_seconds_estimate;
  Json out = agent_json(s.view(a));
  out["transferred_from"] = id;
  out["transfer"] = transfer_summary_json(sum);
  w.respond(201, "application/json", dump_json(out));
}

void delete_agent(ServerState& s, const std::string& id, HttpResponseWriter& w) {
  Agent a;
  if (auto e = s.agents->remove(id, &a)) return reply(w, *e);
  release_context(*s.loop, a.model, a.kv);
  Json out = Json::object();
  out["id"] = id;
  out["object"] = "agent.deleted";
  out["deleted"] = true;
  w.respond(200, "application/json", dump_json(out));
}

}  // namespace

void handle_agents(ServerState& s, const HttpRequest& req, HttpResponseWriter& w) {
  const std::string& path = req.path;
  if (path == "/v1/agents") {
    if (req.method == "POST") return create_agent(s, req, w);
    if (req.method != "GET") return reply(w, ApiError{405, "use GET or POST /v1/agents", ""});
    Json data = Json::array();
    for (const Agent& a : s.agents->list()) data.push_back(agent_json(s.view(a)));
    Json out = Json::object();
    out["object"] = "list";
    out["data"] = std::move(data);
    w.respond(200, "application/json", dump_json(out));
    return;
  }
  if (path == "/v1/agents/import") {
    if (req.method != "POST") return reply(w, ApiError{405, "use POST /v1/agents/import", ""});
    return import_agent(s, req, w);
  }
  std::string rest = path.substr(std::string("/v1/agents/").size());
  std::string action;
  if (const size_t slash = rest.find('/'); slash != std::string::npos) {
    action = rest.substr(slash + 1);
    rest = rest.substr(0, slash);
  }
  const std::string& id = rest;
  if (id.empty()) return reply(w, api_error(ErrorCode::kNotFound, "no route for " + excerpt(req.method) + " " + excerpt(path)));
  if (action.empty()) {
    if (req.method == "DELETE") return delete_agent(s, id, w);
    if (req.method != "GET") return reply(w, ApiError{405, "use GET or DELETE /v1/agents/{id}", ""});
    auto a = s.agents->get(id);
    if (!a) return reply(w, api_error(ErrorCode::kNotFound, "agent '" + excerpt(id) + "' does not exist (deleted or expired?)", "agent"));
    w.respond(200, "application/json", dump_json(agent_json(s.view(*a))));
    return;
  }
  if (action == "export") {
    if (req.method != "GET") return reply(w, ApiError{405, "use GET " + path, ""});
    return export_agent(s, id, w);
  }
  if (action != "respond" && action != "messages" && action != "fork" && action != "score" && action != "transfer")
    return reply(w, api_error(ErrorCode::kNotFound, "no route for " + excerpt(req.method) + " " + excerpt(path)));
  if (req.method != "POST") return reply(w, ApiError{405, "use POST " + path, ""});
  if (action == "respond") return respond_agent(s, id, req, w);
  if (action == "messages") return append_messages(s, id, req, w);
  if (action == "score") return handle_score(s, id, req, w);
  if (action == "transfer") return transfer_agent(s, id, req, w);
  return fork_agent(s, id, req, w);
}

}  // namespace agentkv
