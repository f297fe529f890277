#include "server/api_server.h"

#include <chrono>
#include <cstdio>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <random>

#include "prm/calibration_file.h"
#include "engine/request_outcome.h"
#include "server/error_status.h"
#include "server/turn_builder.h"
#include "tokenizer/chat_template.h"

namespace agentkv {

namespace {

int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// Events of one request, handed from the engine thread to the waiting HTTP thread.
struct Mailbox {
  std::mutex mu;
  std::condition_variable cv;
  std::deque<RequestEvent> events;
};

// Compares without an early exit, so the time taken does not tell a client how much of a guessed key
// was right.
bool same_secret(const std::string& a, const std::string& b) {
  unsigned diff = a.size() == b.size() ? 0u : 1u;
  for (size_t i = 0; i < a.size(); ++i) diff |= unsigned(uint8_t(a[i]) ^ uint8_t(b.empty() ? 0 : b[i % b.size()]));
  return diff == 0;
}

void reply_error(HttpResponseWriter& w, const ApiError& e) {
  w.respond(e.status, "application/json", error_json(e));
}

std::string request_id(bool chat) {
  static std::atomic<uint64_t> counter{0};
  static const uint64_t salt = std::random_device{}();
  char buf[64];
  std::snprintf(buf, sizeof buf, "%s-%016llx%04llx", chat ? "chatcmpl" : "cmpl", (unsigned long long)salt,
                (unsigned long long)(counter.fetch_add(1) & 0xffff));
  return buf;
}

}  // namespace

ApiServer::ApiServer(const ServeOptions& opt) : opt_(opt) {}

ApiServer::~ApiServer() { stop(); }

Result<std::unique_ptr<ApiServer>> ApiServer::create(const std::vector<std::string>& models, const ServeOptions& opt) {
  if (models.empty()) return make_error("serve needs at least one -m MODEL");
  std::unique_ptr<ApiServer> s(new ApiServer(opt));
  s->pool_ = std::make_unique<ThreadPool>(opt.threads);
  s->created_ = unix_now();
  const int64_t kv_mem = opt.kv_mem > 0 ? opt.kv_mem : default_kv_mem_bytes() / int64_t(models.size());
  for (const std::string& name : models) {
    Served m;
    m.id = name;
    AGENTKV_ASSIGN_OR_RETURN(m.lm, load_model(name));
    for (const Served& other : s->models_)
      if (other.id == name) return make_error("model '" + name + "' given twice");
    EngineOptions eo;
    eo.kv.mem_bytes = kv_mem;
    eo.kv.block_size = opt.block_size;
    eo.max_n = opt.limits.max_n;
    std::unique_ptr<Engine> engine;
    AGENTKV_ASSIGN_OR_RETURN(engine, Engine::create(*m.lm, eo, *s->pool_));
    m.engine = std::move(engine);
    s->models_.push_back(std::move(m));
  }
  // Cheap checks first: a bad head file fails before minutes of gate runs.
  AGENTKV_TRY(s->load_verify_heads());
  // After every model loaded, so a bad model list fails before minutes of gate runs.
  if (opt.round_sharing && opt.sharing_gate)
    for (Served& m : s->models_) {
      auto verdict = opt.sharing_gate(*m.lm, *s->pool_);
      if (!verdict.ok()) return make_error(verdict.code(), "model '" + m.id + "': KV-sharing quality gate: " + verdict.error());
      m.sharing_allowed = verdict->first;
      m.gate_summary = verdict->second;
    }
  std::vector<Engine*> engines;
  for (Served& m : s->models_) engines.push_back(m.engine.get());
  s->loop_ = std::make_unique<EngineLoop>(std::move(engines));
  HttpServerOptions ho;
  ho.host = opt.host;
  ho.port = opt.port;
  ho.limits.max_body_bytes = opt.max_body_bytes;
  s->http_ = std::make_unique<HttpServer>(ho);
  s->agents_ = std::make_unique<AgentRegistry>(opt.agent_limits.max_agents);
  return s;
}

Status ApiServer::load_verify_heads() {
  std::vector<bool> fitted(models_.size(), false);
  for (const std::string& path : opt_.prm_calibrations) {
    auto rec = prm::read_calibration(path);
    if (!rec.ok()) return make_error(rec.code(), "--prm-calibration " + path + ": " + rec.error());
    bool used = false;
    for (size_t i = 0; i < models_.size(); ++i) {
      Served& m = models_[i];
      if (m.lm->fingerprint != rec->model_fingerprint) continue;
      if (fitted[i]) return make_error("--prm-calibration: two heads for model '" + m.id + "'");
      const ModelConfig& c = m.lm->config();
      auto head = prm::head_from_record(*rec, *m.lm->tokenizer, m.lm->fingerprint, c.n_embd, c.n_layer);
      if (!head.ok()) return make_error(head.code(), "--prm-calibration " + path + ": " + head.error());
      m.verify_head = std::move(*head);
      char auroc[32];
      std::snprintf(auroc, sizeof auroc, "%.3f", rec->heldout_auroc);
      m.verifier_summary = "fitted probe at layer " + std::to_string(m.verify_head->feature_layer) + " (" + path +
                           "; held-out AUROC " + auroc + ")";
      fitted[i] = used = true;
    }
    if (!used)
      return make_error("--prm-calibration " + path + " was fitted on " + rec->model_name + ", which is not served");
  }
  for (size_t i = 0; i < models_.size(); ++i) {
    if (fitted[i]) continue;
    Served& m = models_[i];
    auto head = prm::make_verify_head(*m.lm->tokenizer);
    if (!head.ok()) {
      m.verifier_summary = "no verify head for this tokenizer: " + head.error();
      continue;
    }
    m.verify_head = std::move(*head);
    m.verifier_summary = "zero-shot: log p(+)/p(-) after the verify question, uncalibrated";
  }
  return {};
}

Status ApiServer::start() {
  AGENTKV_TRY(http_->start([this](const HttpRequest& req, HttpResponseWriter& w) { handle(req, w); }));
  sweeper_ = std::thread([this] { sweep_agents_loop(); });
  return {};
}

void ApiServer::stop() {
  {
    std::lock_guard<std::mutex> lock(sweep_mu_);
    sweep_stop_ = true;
  }
  sweep_cv_.notify_all();
  if (sweeper_.joinable()) sweeper_.join();
  if (http_) http_->stop();  // running handlers finish: the loop below still serves them
  if (loop_) loop_->shutdown(true);  // the engines' retained agent contexts go with them
}

int ApiServer::find_model(const std::string& name) const {
  for (size_t i = 0; i < models_.size(); ++i)
    if (models_[i].id == name || models_[i].lm->name == name || models_[i].lm->path == name) return int(i);
  return -1;
}

std::string ApiServer::models_json() const {
  Json data = Json::array();
  for (const Served& m : models_) {
    Json j = Json::object();
    j["id"] = m.id;
    j["object"] = "model";
    j["created"] = created_;
    j["owned_by"] = "agentkv";
    // Whether /v1/rounds shares KV on this model, and the start-up quality gate's measurement.
    Json sharing = Json::object();
    sharing["rounds"] = opt_.round_sharing && m.sharing_allowed;
    sharing["recompute"] = opt_.recompute;
    if (!m.gate_summary.empty()) sharing["quality_gate"] = m.gate_summary;
    j["kv_sharing"] = std::move(sharing);
    // What POST /v1/agents/{id}/score reads on this model.
    Json verifier = Json::object();
    verifier["kind"] = !m.verify_head ? "none" : m.verify_head->probe ? "probe" : "zero-shot";
    verifier["summary"] = m.verifier_summary;
    j["verifier"] = std::move(verifier);
    data.push_back(std::move(j));
  }
  Json out = Json::object();
  out["object"] = "list";
  out["data"] = std::move(data);
  return dump_json(out);
}

std::string ApiServer::metrics_text() const {
  std::string out;
  auto family = [&](const char* name, const char* type, const char* help) {
    out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
  };
  auto sample = [&](const std::string& name, const std::string& model, double v, const std::string& extra = "") {
    char num[64];
    std::snprintf(num, sizeof num, "%.17g", v);
    out += name + "{model=\"" + model + "\"" + extra + "} " + num + "\n";
  };
  std::vector<EngineMetrics> ms;
  for (size_t i = 0; i < models_.size(); ++i) ms.push_back(loop_->metrics(i));
  struct Row {
    const char* name;
    const char* type;
    const char* help;
    double (*get)(const EngineMetrics&);
  };
  static const Row rows[] = {
      {"agentkv_prefix_cache_queries_total", "counter", "Prompt tokens looked up in the prefix cache.",
       [](const EngineMetrics& m) { return double(m.prefix_query_tokens); }},
      {"agentkv_prefix_cache_hits_total", "counter", "Prompt tokens served from the prefix cache.",
       [](const EngineMetrics& m) { return double(m.prefix_hit_tokens); }},
      {"agentkv_kv_blocks_used", "gauge", "KV blocks referenced by sequences.",
       [](const EngineMetrics& m) { return double(m.blocks_used); }},
      {"agentkv_kv_blocks_free", "gauge", "KV blocks free (cached or empty).",
       [](const EngineMetrics& m) { return double(m.blocks_free); }},
      {"agentkv_kv_blocks_cached", "gauge", "KV blocks in the prefix cache.",
       [](const EngineMetrics& m) { return double(m.blocks_cached); }},
      {"agentkv_kv_blocks_total", "gauge", "KV blocks in the budget.",
       [](const EngineMetrics& m) { return double(m.blocks_total); }},
      {"agentkv_preemptions_total", "counter", "Sequences preempted for recompute.",
       [](const EngineMetrics& m) { return double(m.preemptions); }},
      {"agentkv_tokens_prefilled_total", "counter", "Tokens computed without sampling.",
       [](const EngineMetrics& m) { return double(m.tokens_prefilled); }},
      {"agentkv_tokens_decoded_total", "counter", "Tokens sampled.",
       [](const EngineMetrics& m) { return double(m.tokens_decoded); }},
      {"agentkv_requests_running", "gauge", "Requests with sequences running.",
       [](const EngineMetrics& m) { return double(m.requests_running); }},
      {"agentkv_requests_waiting", "gauge", "Sequences waiting for admission.",
       [](const EngineMetrics& m) { return double(m.requests_waiting); }},
      {"agentkv_requests_finished_total", "counter", "Requests finished.",
       [](const EngineMetrics& m) { return double(m.requests_finished); }},
      {"agentkv_requests_cancelled_total", "counter", "Requests cancelled.",
       [](const EngineMetrics& m) { return double(m.requests_cancelled); }},
      {"agentkv_kv_retained_contexts", "gauge", "Retained KV snapshots (agents' pinned contexts).",
       [](const EngineMetrics& m) { return double(m.retained_snapshots); }},
      {"agentkv_kv_retained_compact_contexts", "gauge",
       "Retained contexts kept as master + sparse diff (collective KV sharing) between rounds.",
       [](const EngineMetrics& m) { return double(m.retained_compact); }},
      {"agentkv_kv_retained_compact_blocks", "gauge",
       "Blocks those compact contexts hold on their own (diff rows and packed own turns).",
       [](const EngineMetrics& m) { return double(m.retained_compact_blocks); }},
      {"agentkv_kv_retained_tokens", "gauge", "Tokens in retained KV snapshots.",
       [](const EngineMetrics& m) { return double(m.retained_tokens); }},
  };
  for (const Row& r : rows) {
    family(r.name, r.type, r.help);
    for (size_t i = 0; i < models_.size(); ++i) sample(r.name, models_[i].id, r.get(ms[i]));
  }
  auto histogram = [&](const char* name, const char* help, const LatencyHistogram EngineMetrics::*field) {
    family(name, "histogram", help);
    for (size_t i = 0; i < models_.size(); ++i) {
      const LatencyHistogram& h = ms[i].*field;
      uint64_t cum = 0;
      for (size_t b = 0; b < h.bounds().size(); ++b) {
        cum += h.counts()[b];
        char le[32];
        std::snprintf(le, sizeof le, "%g", h.bounds()[b]);
        sample(std::string(name) + "_bucket", models_[i].id, double(cum), std::string(",le=\"") + le + "\"");
      }
      sample(std::string(name) + "_bucket", models_[i].id, double(h.count()), ",le=\"+Inf\"");
      sample(std::string(name) + "_sum", models_[i].id, h.sum());
      sample(std::string(name) + "_count", models_[i].id, double(h.count()));
    }
  };
  family("agentkv_agents_resident", "gauge", "Agents alive (their contexts pinned).");
  for (size_t i = 0; i < models_.size(); ++i) sample("agentkv_agents_resident", models_[i].id, double(agents_->count_on_model(i)));
  histogram("agentkv_time_to_first_token_seconds", "Time from arrival to the first token.", &EngineMetrics::ttft);
  histogram("agentkv_inter_token_latency_seconds", "Time between tokens of a sequence.", &EngineMetrics::inter_token);
  return out;
}

void ApiServer::handle(const HttpRequest& req, HttpResponseWriter& w) {
  const std::string& path = req.path;
  if (path == "/health") {
    if (req.method != "GET" && req.method != "HEAD") return reply_error(w, ApiError{405, "use GET /health", ""});
    w.respond(200, "application/json", "{\"status\":\"ok\"}");
    return;
  }
  if (!opt_.api_key.empty()) {
    const std::string* auth = req.header("authorization");
    if (!auth || !same_secret(*auth, "Bearer " + opt_.api_key))
      return reply_error(w, ApiError{401, "missing or wrong API key (send Authorization: Bearer KEY)", "",
                                     "authentication_error"});
  }
  if (path == "/v1/models") {
    if (req.method != "GET") return reply_error(w, ApiError{405, "use GET /v1/models", ""});
    w.respond(200, "application/json", models_json());
    return;
  }
  if (path == "/metrics") {
    if (req.method != "GET") return reply_error(w, ApiError{405, "use GET /metrics", ""});
    w.respond(200, "text/plain; version=0.0.4", metrics_text());
    return;
  }
  if (path == "/v1/agents" || path.rfind("/v1/agents/", 0) == 0) return handle_agents(req, w);
  if (path == "/v1/rounds") {
    if (req.method != "POST") return reply_error(w, ApiError{405, "use POST /v1/rounds", ""});
    return handle_round(req, w);
  }
  if (path == "/v1/completions" || path == "/v1/chat/completions") {
    if (req.method != "POST") return reply_error(w, ApiError{405, "use POST " + path, ""});
    handle_completion(req, w, path == "/v1/chat/completions");
    return;
  }
  reply_error(w, api_error(ErrorCode::kNotFound, "no route for " + req.method + " " + path));
}

void ApiServer::handle_completion(const HttpRequest& req, HttpResponseWriter& w, bool chat) {
  auto body = parse_json(req.body, 32);
  if (!body.ok()) return reply_error(w, ApiError{400, "malformed JSON body: " + body.error(), ""});
  CompletionRequest cr;
  if (auto e = parse_completion_request(*body, chat, opt_.limits, &cr)) return reply_error(w, *e);
  const int mi = find_model(cr.model);
  if (mi < 0) {
    return reply_error(w, api_error(ErrorCode::kNotFound,
                                    "model '" + cr.model + "' does not exist (GET /v1/models lists them)", "model"));
  }
  Served& m = models_[size_t(mi)];
  const Tokenizer& tok = *m.lm->tokenizer;
  RequestParams p;
  if (chat) {
    auto text = apply_chat_template(tok, cr.messages, true);
    if (!text.ok()) return reply_error(w, api_error(text.status_error(), "messages"));
    p.prompt = tok.encode(*text, tok.add_bos_default(), true);
  } else if (cr.prompt_is_tokens) {
    p.prompt = cr.prompt_tokens;
  } else {
    p.prompt = tok.encode(cr.prompt, tok.add_bos_default(), false);
  }
  // OpenAI's defaults: 16 tokens for completions; chat runs to the end of the context.
  if (auto e = fit_max_tokens("the prompt", chat ? "messages" : "prompt", int64_t(p.prompt.size()), m.engine->n_ctx(),
                              cr.max_tokens, chat ? std::nullopt : std::optional<int>(16), opt_.limits.max_tokens_limit,
                              &p.max_tokens))
    return reply_error(w, *e);
  apply_sampling(cr, &p);
  p.n = cr.n;
  p.top_logprobs = cr.logprobs;
  const int n_prompt = int(p.prompt.size());

  auto box = std::make_shared<Mailbox>();
  auto id = loop_->submit(std::move(p), [box](const RequestEvent& ev) {
    std::lock_guard<std::mutex> lock(box->mu);
    box->events.push_back(ev);
    box->cv.notify_one();
  }, size_t(mi));
  if (!id.ok()) return reply_error(w, api_error(id.status_error()));

  const std::string rid = request_id(chat);
  const int64_t created = unix_now();
  std::vector<ChoiceOutput> choices(size_t(cr.n));
  for (int i = 0; i < cr.n; ++i) choices[size_t(i)].index = i;
  std::vector<bool> started(size_t(cr.n), false);
  UsageCounts usage;
  usage.prompt_tokens = n_prompt;
  bool streaming = false;
  if (cr.stream) {
    if (!w.start_stream(200, "text/event-stream", {{"Cache-Control", "no-cache"}})) {
      loop_->cancel(*id, size_t(mi));
      return;
    }
    streaming = true;
  }
  auto send = [&](const Json& j) { return w.write("data: " + dump_json(j) + "\n\n"); };
  bool finished = false;
  std::optional<Error> error;
  auto last_check = std::chrono::steady_clock::now();
  while (!finished) {
    std::deque<RequestEvent> batch;
    {
      std::unique_lock<std::mutex> lock(box->mu);
      box->cv.wait_for(lock, std::chrono::milliseconds(200), [&] { return !box->events.empty(); });
      batch.swap(box->events);
    }
    // A client that went away has its request cancelled and its blocks freed; checked at least every
    // 200 ms, also while events keep coming (a long non-streamed generation writes nothing).
    const auto now = std::chrono::steady_clock::now();
    if (batch.empty() || now - last_check >= std::chrono::milliseconds(200)) {
      last_check = now;
      if (w.client_gone()) {
        loop_->cancel(*id, size_t(mi));
        return;
      }
    }
    if (batch.empty()) continue;
    for (const RequestEvent& ev : batch) {
      if (ev.seq_index < 0 || ev.seq_index >= cr.n) continue;
      ChoiceOutput& c = choices[size_t(ev.seq_index)];
      usage.cached_tokens = ev.n_cached_prompt;
      if (!ev.error.empty()) error = make_error(ev.error_code, ev.error);
      std::string tok_text;
      std::vector<std::string> top_texts;
      const bool counted = answer_token(ev);
      if (counted) ++usage.completion_tokens;
      if (ev.has_token && cr.logprobs >= 0 && counted) {
        tok_text = tok.token_to_piece(ev.token, false);
        for (auto& [t, lp] : ev.logprob.top) top_texts.push_back(tok.token_to_piece(t, false));
        c.logprobs.push_back(ev.logprob);
        c.token_texts.push_back(tok_text);
        c.top_texts.push_back(top_texts);
      }
      c.text += ev.text;
      std::string reason;
      if (ev.seq_finished) {
        reason = openai_finish_reason(ev.finish_reason);
        c.finish_reason = reason;
      }
      if (streaming && (!ev.text.empty() || ev.seq_finished || (cr.logprobs >= 0 && counted))) {
        const bool first = !started[size_t(ev.seq_index)];
        started[size_t(ev.seq_index)] = true;
        const bool with_lp = cr.logprobs >= 0 && counted;
        if (!send(stream_chunk_json(cr, rid, created, ev.seq_index, ev.text, reason, first,
                                    with_lp ? &ev.logprob : nullptr, with_lp ? &tok_text : nullptr,
                                    with_lp ? &top_texts : nullptr))) {
          loop_->cancel(*id, size_t(mi));
          return;
        }
      }
      if (ev.request_finished) finished = true;
    }
  }
  if (error) {
    if (streaming) {
      w.write("data: " + error_json(api_error(*error)) + "\n\n");
      w.end_stream();
    } else {
      reply_error(w, api_error(*error));
    }
    return;
  }
  if (streaming) {
    if (cr.include_usage) send(stream_usage_chunk_json(cr, rid, created, usage));
    w.write("data: [DONE]\n\n");
    w.end_stream();
    return;
  }
  w.respond(200, "application/json", dump_json(completion_response_json(cr, rid, created, choices, usage)));
}

}  // namespace agentkv
