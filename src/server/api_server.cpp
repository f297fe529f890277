// ApiServer (server/api_server.h): start-up (models, engines, quality gates, verify heads, transfer
// maps), shutdown, the agents' TTL sweeper and the router. The routes themselves are in
// server/*_routes.cpp.
#include "server/api_server.h"

#include <algorithm>
#include <cstdio>

#include "prm/adapter_file.h"
#include "prm/calibration_file.h"
#include "server/error_status.h"
#include "server/kv_jobs.h"
#include "server/routes.h"

namespace agentkv {

namespace {

// Compares without an early exit, so the time taken does not tell a client how much of a guessed key
// was right.
bool same_secret(const std::string& a, const std::string& b) {
  unsigned diff = a.size() == b.size() ? 0u : 1u;
  for (size_t i = 0; i < a.size(); ++i) diff |= unsigned(uint8_t(a[i]) ^ uint8_t(b.empty() ? 0 : b[i % b.size()]));
  return diff == 0;
}

// Bodies above kLargeBodyBytes (the transport reads and handles them a few at a time:
// HttpServerOptions::max_large_bodies) are scanned (json_longest_array) before any route builds their tree: a JSON array's tree costs
// ~19 times its text for token ids, so one 8 MB body would add ~155 MB. Smaller bodies cannot hold
// an array longer than any context, nor cost more than a few MB.
constexpr size_t kLargeBodyBytes = size_t(64) << 10;

}  // namespace

Result<std::optional<std::string>> bearer_token(const HttpRequest& req) {
  const std::string* value = nullptr;
  for (const auto& [name, v] : req.headers) {
    if (name != "authorization") continue;
    if (value != nullptr) return make_error("two Authorization headers; send one");
    value = &v;
  }
  if (value == nullptr) return std::optional<std::string>();
  const std::string_view text = *value;
  const size_t space = text.find(' ');
  if (space == std::string_view::npos || !http_iequals(text.substr(0, space), "bearer"))
    return std::optional<std::string>();
  const size_t token = text.find_first_not_of(' ', space);
  return std::optional<std::string>(token == std::string_view::npos ? "" : std::string(text.substr(token)));
}

ApiServer::~ApiServer() { stop(); }

Result<std::unique_ptr<ApiServer>> ApiServer::create(const std::vector<std::string>& models, const ServeOptions& opt,
                                                     HttpServerOptions transport) {
  if (models.empty()) return make_error("serve needs at least one -m MODEL");
  std::unique_ptr<ApiServer> s(new ApiServer());
  s->s_.opt = opt;
  s->s_.pool = std::make_unique<ThreadPool>(opt.threads);
  s->s_.created = unix_now();
  const int64_t kv_mem = opt.kv_mem > 0 ? opt.kv_mem : default_kv_mem_bytes() / int64_t(models.size());
  for (const std::string& name : models) {
    ServedModel m;
    m.id = name;
    AGENTKV_ASSIGN_OR_RETURN(m.lm, load_model(name));
    for (const ServedModel& other : s->s_.models)
      if (other.id == name) return make_error("model '" + name + "' given twice");
    EngineOptions eo;
    eo.kv.mem_bytes = kv_mem;
    eo.kv.block_size = opt.block_size;
    eo.kv.disk = opt.kv_disk;
    eo.kv.redis = opt.kv_redis;
    eo.scheduler.max_batch_tokens = opt.max_batch_tokens;
    eo.max_n = opt.limits.max_n;
    eo.chat_compact = opt.chat_compact;
    eo.diff_format = opt.diff_format;
    eo.resume_in_attention = opt.resume_in_attention;
    eo.echo_keep = opt.echo_keep;
    eo.master_context = opt.master_context;
    std::unique_ptr<Engine> engine;
    AGENTKV_ASSIGN_OR_RETURN(engine, Engine::create(*m.lm, eo, *s->s_.pool));
    m.engine = std::move(engine);
    s->s_.models.push_back(std::move(m));
  }
  // Cheap checks first: a bad head file fails before minutes of gate runs.
  AGENTKV_TRY(s->load_verify_heads());
  AGENTKV_TRY(s->load_transfer_maps());
  // After every model loaded, so a bad model list fails before minutes of gate runs.
  if (opt.round_sharing && opt.sharing_gate)
    for (ServedModel& m : s->s_.models) {
      auto verdict = opt.sharing_gate(*m.lm, *s->s_.pool);
      if (!verdict.ok()) return make_error(verdict.code(), "model '" + m.id + "': KV-sharing quality gate: " + verdict.error());
      m.sharing_allowed = verdict->first;
      m.gate_summary = verdict->second;
    }
  if (opt.chat_sharing && opt.chat_sharing_gate)
    for (ServedModel& m : s->s_.models) {
      auto verdict = opt.chat_sharing_gate(*m.lm, *s->s_.pool);
      if (!verdict.ok())
        return make_error(verdict.code(), "model '" + m.id + "': chat-sharing quality gate: " + verdict.error());
      m.chat_sharing_allowed = verdict->first;
      m.chat_gate_summary = verdict->second;
    }
  std::vector<Engine*> engines;
  for (ServedModel& m : s->s_.models) engines.push_back(m.engine.get());
  s->s_.loop = std::make_unique<EngineLoop>(std::move(engines));
  transport.host = opt.host;
  transport.port = opt.port;
  transport.limits.max_body_bytes = opt.max_body_bytes;
  s->http_ = std::make_unique<HttpServer>(std::move(transport));
  s->s_.agents = std::make_unique<AgentRegistry>(opt.agent_limits.max_agents,
                                                   opt.agent_limits.max_resident_text_bytes);
  // No field takes more elements than the longest context (token ids, messages, content parts: each
  // at least a token) or a round's agents and a score's steps.
  s->max_array_elements_ = std::max(opt.agent_limits.max_round_agents, opt.agent_limits.max_score_steps);
  for (const ServedModel& m : s->s_.models) s->max_array_elements_ = std::max(s->max_array_elements_, size_t(m.engine->n_ctx()));
  return s;
}

Status ApiServer::load_verify_heads() {
  std::vector<bool> fitted(s_.models.size(), false);
  for (const std::string& path : s_.opt.prm_calibrations) {
    auto rec = prm::read_calibration(path);
    if (!rec.ok()) return make_error(rec.code(), "--prm-calibration " + path + ": " + rec.error());
    bool used = false;
    for (size_t i = 0; i < s_.models.size(); ++i) {
      ServedModel& m = s_.models[i];
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
  for (const std::string& path : s_.opt.prm_adapters) {
    // The file names its model by fingerprint; each served model checks it in turn.
    std::string refusals;
    bool used = false;
    for (size_t i = 0; i < s_.models.size() && !used; ++i) {
      ServedModel& m = s_.models[i];
      auto file = prm::read_adapter_file(path, m.lm->config(), m.lm->fingerprint);
      if (!file.ok()) {
        if (file.code() != ErrorCode::kConflict) return make_error(file.code(), "--prm-adapter: " + file.error());
        refusals += (refusals.empty() ? "" : "; ") + file.error();
        continue;
      }
      if (fitted[i]) return make_error("--prm-adapter " + path + ": model '" + m.id + "' already has a verifier");
      const int rank = file->adapters.rank();
      const double auroc = file->record.heldout_auroc;
      auto head = prm::head_from_adapter_file(std::move(*file), *m.lm->tokenizer);
      if (!head.ok()) return make_error(head.code(), "--prm-adapter " + path + ": " + head.error());
      m.verify_head = std::move(*head);
      char figure[48];
      std::snprintf(figure, sizeof figure, auroc > 0 ? "held-out AUROC %.3f" : "held-out AUROC not measured", auroc);
      m.verifier_summary = "LoRA adapters of rank " + std::to_string(rank) + " on the verify token (" + path + "; " +
                           figure + ")";
      fitted[i] = used = true;
    }
    if (!used) return make_error(ErrorCode::kConflict, "--prm-adapter: no served model takes it: " + refusals);
  }
  for (size_t i = 0; i < s_.models.size(); ++i) {
    if (fitted[i]) continue;
    ServedModel& m = s_.models[i];
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

Status ApiServer::load_transfer_maps() {
  auto served = [&](uint64_t fingerprint) {
    for (size_t i = 0; i < s_.models.size(); ++i)
      if (s_.models[i].lm->fingerprint == fingerprint) return int(i);
    return -1;
  };
  for (const std::string& path : s_.opt.transfer_maps) {
    auto map = read_transfer_map(path);
    if (!map.ok()) return make_error(map.code(), "--transfer-map " + path + ": " + map.error());
    const int from = served(map->sender_fingerprint), to = served(map->receiver_fingerprint);
    const std::string pair = map->sender_name + " -> " + map->receiver_name;
    if (from < 0 || to < 0) {
      std::string names;
      for (const ServedModel& m : s_.models) names += (names.empty() ? "" : ", ") + m.id;
      return make_error("--transfer-map " + path + " maps " + pair + "; " +
                        (from < 0 ? map->sender_name : map->receiver_name) + " is not served (serving " + names + ")");
    }
    AGENTKV_TRY(check_transfer_pair(*map, *s_.models[size_t(from)].lm, *s_.models[size_t(to)].lm));
    if (s_.find_transfer_map(size_t(from), size_t(to)))
      return make_error("--transfer-map: two maps for " + s_.models[size_t(from)].id + " -> " + s_.models[size_t(to)].id);
    s_.transfer_maps.push_back(ServedTransferMap{size_t(from), size_t(to), std::move(map).value(), path});
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
  if (s_.loop) s_.loop->shutdown(true);  // the engines' retained agent contexts go with them
}

void ApiServer::sweep_agents_loop() {
  std::unique_lock<std::mutex> lock(sweep_mu_);
  while (!sweep_stop_) {
    sweep_cv_.wait_for(lock, std::chrono::seconds(1));
    if (sweep_stop_) break;
    lock.unlock();
    for (const Agent& a : s_.agents->take_expired(unix_seconds())) release_context(*s_.loop, a.model, a.kv);
    lock.lock();
  }
}

void ApiServer::handle(const HttpRequest& req, HttpResponseWriter& w) {
  const std::string& path = req.path;
  if (path == "/health") return handle_health(req, w);
  auto credentials = bearer_token(req);
  if (!credentials.ok()) return reply(w, ApiError{400, credentials.error(), "authorization"});
  if (!s_.opt.api_key.empty()) {
    if (!*credentials || !same_secret(**credentials, s_.opt.api_key))
      return reply(w, ApiError{401, "missing or wrong API key (send Authorization: Bearer KEY)", "",
                               "authentication_error"});
  }
  if (req.body.size() > kLargeBodyBytes && json_longest_array(req.body, max_array_elements_) > max_array_elements_)
    return reply(w, ApiError{413, "the body holds an array of more than " + std::to_string(max_array_elements_) +
                                      " elements; no field takes that many (a prompt or messages longer than the context cannot run)",
                              ""});
  route(req, w);
}

void ApiServer::route(const HttpRequest& req, HttpResponseWriter& w) {
  const std::string& path = req.path;
  if (path == "/v1/models") return handle_models(s_, req, w);
  if (path == "/metrics") return handle_metrics(s_, req, w);
  if (path == "/openapi.json") return handle_openapi(req, w);
  if (path == "/v1/agents" || path.rfind("/v1/agents/", 0) == 0) return handle_agents(s_, req, w);
  if (path == "/v1/rounds") {
    if (req.method != "POST") return reply(w, ApiError{405, "use POST /v1/rounds", ""});
    return handle_round(s_, req, w);
  }
  if (path == "/v1/completions" || path == "/v1/chat/completions") {
    if (req.method != "POST") return reply(w, ApiError{405, "use POST " + path, ""});
    return handle_completion(s_, req, w, path == "/v1/chat/completions");
  }
  reply(w, api_error(ErrorCode::kNotFound, "no route for " + excerpt(req.method) + " " + excerpt(path)));
}

}  // namespace agentkv
