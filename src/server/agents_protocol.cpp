#include "server/agents_protocol.h"

#include <cmath>
#include <set>

namespace agentkv {

namespace {

ApiError bad(const std::string& param, const std::string& msg) { return ApiError{400, msg, param}; }

std::optional<ApiError> only_fields(const Json& body, const std::set<std::string>& allowed) {
  if (!body.is_object()) return bad("", "the request body must be a JSON object");
  for (const auto& [key, value] : body.members())
    if (!allowed.count(key)) return bad(key, "unknown field '" + key + "'");
  return std::nullopt;
}

std::optional<ApiError> get_string(const Json& body, const char* key, size_t max_bytes, std::string* out) {
  const Json* v = body.get(key);
  if (!v || v->is_null()) return std::nullopt;
  if (!v->is_string()) return bad(key, std::string("'") + key + "' must be a string");
  if (v->as_string().size() > max_bytes)
    return bad(key, std::string("'") + key + "' is over " + std::to_string(max_bytes) + " bytes");
  *out = v->as_string();
  return std::nullopt;
}

std::optional<ApiError> get_ttl(const Json& body, const AgentLimits& al, std::optional<double>* out) {
  std::optional<double> ttl;
  if (auto e = get_number(body, "ttl_seconds", 1, al.max_ttl_s, &ttl)) return e;
  *out = ttl;
  return std::nullopt;
}

const std::set<std::string> kGenerationKeys = {"max_tokens", "temperature", "top_p", "seed", "stop"};

std::optional<ApiError> parse_generation(const Json& body, const ApiLimits& limits, GenerationFields* g) {
  std::optional<int64_t> mt, seed;
  if (auto e = get_int(body, "max_tokens", 1, limits.max_tokens_limit, &mt)) return e;
  if (mt) g->max_tokens = int(*mt);
  std::optional<double> temp, top_p;
  if (auto e = get_number(body, "temperature", 0, 2, &temp)) return e;
  if (temp) g->temperature = float(*temp);
  if (auto e = get_number(body, "top_p", 0, 1, &top_p)) return e;
  if (top_p) {
    if (*top_p <= 0) return bad("top_p", "'top_p' must be in (0, 1]");
    g->top_p = float(*top_p);
  }
  if (auto e = get_int(body, "seed", -9.2e18, 9.2e18, &seed)) return e;
  if (seed) g->seed = uint64_t(*seed);
  return parse_stop(body.get("stop"), limits, &g->stop);
}

std::set<std::string> with_generation(std::set<std::string> keys) {
  keys.insert(kGenerationKeys.begin(), kGenerationKeys.end());
  return keys;
}

}  // namespace

std::optional<ApiError> parse_agent_create(const Json& body, const ApiLimits& limits, const AgentLimits& al,
                                           AgentCreateRequest* out) {
  if (auto e = only_fields(body, {"model", "name", "system", "messages", "ttl_seconds", "prefill"})) return e;
  AgentCreateRequest r;
  const Json* model = body.get("model");
  if (!model || !model->is_string() || model->as_string().empty())
    return bad("model", "'model' is required and must be a non-empty string");
  r.model = model->as_string();
  if (auto e = get_string(body, "name", 256, &r.name)) return e;
  std::string system;
  if (auto e = get_string(body, "system", limits.max_prompt_bytes, &system)) return e;
  if (!system.empty()) r.messages.push_back(ChatMessage{"system", system});
  if (const Json* msgs = body.get("messages"); msgs && !msgs->is_null()) {
    std::vector<ChatMessage> more;
    if (auto e = parse_messages(msgs, "messages", limits, &more)) return e;
    if (!system.empty())
      for (size_t i = 0; i < more.size(); ++i)
        if (more[i].role == "system")
          return bad("messages[" + std::to_string(i) + "].role", "'system' is given, so messages must not hold another system message");
    r.messages.insert(r.messages.end(), more.begin(), more.end());
  }
  std::optional<double> ttl;
  if (auto e = get_ttl(body, al, &ttl)) return e;
  r.ttl_s = ttl ? *ttl : al.default_ttl_s;
  if (auto e = get_bool(body, "prefill", &r.prefill)) return e;
  *out = std::move(r);
  return std::nullopt;
}

std::optional<ApiError> parse_agent_messages(const Json& body, const ApiLimits& limits, std::vector<ChatMessage>* out) {
  if (auto e = only_fields(body, {"messages"})) return e;
  std::vector<ChatMessage> msgs;
  if (auto e = parse_messages(body.get("messages"), "messages", limits, &msgs)) return e;
  *out = std::move(msgs);
  return std::nullopt;
}

std::optional<ApiError> parse_agent_respond(const Json& body, const ApiLimits& limits, AgentRespondRequest* out) {
  if (auto e = only_fields(body, with_generation({"messages"}))) return e;
  AgentRespondRequest r;
  if (const Json* msgs = body.get("messages"); msgs && !msgs->is_null())
    if (auto e = parse_messages(msgs, "messages", limits, &r.messages)) return e;
  if (auto e = parse_generation(body, limits, &r.gen)) return e;
  *out = std::move(r);
  return std::nullopt;
}

std::optional<ApiError> parse_agent_fork(const Json& body, const AgentLimits& al, AgentForkRequest* out) {
  if (auto e = only_fields(body, {"name", "ttl_seconds"})) return e;
  AgentForkRequest r;
  if (auto e = get_string(body, "name", 256, &r.name)) return e;
  if (auto e = get_ttl(body, al, &r.ttl_s)) return e;
  *out = std::move(r);
  return std::nullopt;
}

std::optional<ApiError> parse_step_score(const Json& body, const ApiLimits& limits, const AgentLimits& al,
                                         StepScoreRequest* out) {
  if (auto e = only_fields(body, {"steps", "prefix"})) return e;
  StepScoreRequest r;
  const Json* steps = body.get("steps");
  if (!steps || !steps->is_array() || steps->items().empty())
    return bad("steps", "'steps' is required and must be a non-empty array of step texts");
  if (steps->items().size() > al.max_score_steps)
    return bad("steps", "'steps' holds more than " + std::to_string(al.max_score_steps) + " steps");
  for (size_t i = 0; i < steps->items().size(); ++i) {
    const Json& s = steps->items()[i];
    const std::string at = "steps[" + std::to_string(i) + "]";
    if (!s.is_string()) return bad(at, "'" + at + "' must be a string");
    if (s.as_string().find_first_not_of(" \t\r\n") == std::string::npos) return bad(at, "'" + at + "' is empty");
    if (s.as_string().size() > limits.max_prompt_bytes)
      return bad(at, "'" + at + "' is over " + std::to_string(limits.max_prompt_bytes) + " bytes");
    r.steps.push_back(s.as_string());
  }
  if (auto e = get_string(body, "prefix", limits.max_prompt_bytes, &r.prefix)) return e;
  *out = std::move(r);
  return std::nullopt;
}

Json step_scores_json(const StepScoreReply& r) {
  Json scores = Json::array();
  for (size_t i = 0; i < r.scores.size(); ++i) {
    const StepScore& s = r.scores[i];
    Json j = Json::object();
    j.set("index", Json::number(double(i)));
    j.set("probability", Json::number(s.probability));
    j.set("score", Json::number(s.score));
    j.set("logodds", std::isfinite(s.logodds) ? Json::number(double(s.logodds)) : Json());
    j.set("tokens", Json::number(double(s.tokens)));
    scores.push(std::move(j));
  }
  Json v = Json::object();
  v.set("kind", Json::string(r.verifier));
  if (r.feature_layer > 0) v.set("layer", Json::number(double(r.feature_layer)));
  Json out = Json::object();
  out.set("object", Json::string("agent.step_scores"));
  out.set("agent", Json::string(r.agent));
  out.set("verifier", std::move(v));
  out.set("scores", std::move(scores));
  Json usage = Json::object();
  usage.set("context_tokens", Json::number(double(r.context_tokens)));
  usage.set("cached_tokens", Json::number(double(r.cached_tokens)));
  out.set("usage", std::move(usage));
  out.set("scoring_seconds", Json::number(r.seconds));
  return out;
}

std::optional<ApiError> parse_round(const Json& body, const ApiLimits& limits, const AgentLimits& al, RoundRequest* out) {
  if (auto e = only_fields(body, with_generation({"agents", "shared", "instruction", "kv_sharing", "recompute"}))) return e;
  RoundRequest r;
  const Json* agents = body.get("agents");
  if (!agents || !agents->is_array() || agents->items().empty())
    return bad("agents", "'agents' is required and must be a non-empty array of agent ids");
  if (agents->items().size() > al.max_round_agents)
    return bad("agents", "'agents' lists more than " + std::to_string(al.max_round_agents) + " agents");
  std::set<std::string> seen;
  for (const Json& a : agents->items()) {
    if (!a.is_string() || a.as_string().empty()) return bad("agents", "'agents' must hold agent id strings");
    if (!seen.insert(a.as_string()).second) return bad("agents", "agent '" + a.as_string() + "' is listed twice");
    r.agents.push_back(a.as_string());
  }
  if (const Json* shared = body.get("shared"); shared && !shared->is_null()) {
    std::string text;
    if (auto e = get_string(body, "shared", limits.max_prompt_bytes, &text)) return e;
    r.shared = std::move(text);
  }
  if (auto e = get_string(body, "instruction", limits.max_prompt_bytes, &r.instruction)) return e;
  if (const Json* v = body.get("kv_sharing"); v && !v->is_null()) {
    if (!v->is_bool()) return bad("kv_sharing", "'kv_sharing' must be true or false");
    r.kv_sharing = v->as_bool();
  }
  if (const Json* v = body.get("recompute"); v && !v->is_null()) {
    if (!v->is_number() || !(v->as_number() >= 0.0 && v->as_number() <= 1.0))
      return bad("recompute", "'recompute' must be a number in [0, 1] (the share of the shared block recomputed)");
    r.recompute = v->as_number();
  }
  if (auto e = parse_generation(body, limits, &r.gen)) return e;
  *out = std::move(r);
  return std::nullopt;
}

Json agent_json(const AgentView& a) {
  Json j = Json::object();
  j.set("id", Json::string(a.id));
  j.set("object", Json::string("agent"));
  j.set("name", Json::string(a.name));
  j.set("model", Json::string(a.model));
  j.set("created", Json::number(double(a.created)));
  j.set("expires_at", Json::number(a.expires_at));
  j.set("messages", Json::number(double(a.n_messages)));
  j.set("resident_tokens", Json::number(double(a.resident_tokens)));
  j.set("busy", Json::boolean(a.busy));
  return j;
}

Json agent_answer_json(const AgentAnswer& a) {
  Json msg = Json::object();
  msg.set("role", Json::string("assistant"));
  msg.set("content", Json::string(a.content));
  Json j = Json::object();
  j.set("agent", Json::string(a.agent));
  j.set("name", Json::string(a.name));
  j.set("message", std::move(msg));
  j.set("finish_reason", Json::string(a.finish_reason));
  j.set("usage", usage_json(a.usage));
  return j;
}

Json round_sharing_json(const RoundSharingReport& r) {
  Json j = Json::object();
  j.set("mode", Json::string(r.mode));
  if (!r.reason.empty()) j.set("reason", Json::string(r.reason));
  if (r.mode == "tokendance") {
    j.set("recompute", Json::number(r.recompute));
    j.set("agents", Json::number(double(r.agents)));
    j.set("segment_tokens", Json::number(double(r.segment_tokens)));
    j.set("recomputed_tokens", Json::number(double(r.recomputed_tokens)));
    j.set("collector_seconds", Json::number(r.collector_seconds));
  }
  return j;
}

}  // namespace agentkv
