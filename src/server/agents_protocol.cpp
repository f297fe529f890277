// The agents and rounds API's request parsers and response JSON (server/agents_protocol.h).
#include "server/agents_protocol.h"

#include <cmath>
#include <set>

namespace agentkv {

namespace {

std::optional<ApiError> only_fields(const Json& body, const std::set<std::string>& allowed) {
  if (!body.is_object()) return bad_request("", "the request body must be a JSON object");
  for (const auto& [key, value] : body.items())
    if (!allowed.count(key)) return bad_request(excerpt(key), "unknown field '" + excerpt(key) + "'");
  return std::nullopt;
}

std::optional<ApiError> get_string(const Json& body, const char* key, size_t max_bytes, std::string* out) {
  const Json* v = json_member(body, key);
  if (!v || v->is_null()) return std::nullopt;
  if (!v->is_string()) return bad_request(key, std::string("'") + key + "' must be a string");
  if (v->get_ref<const std::string&>().size() > max_bytes)
    return bad_request(key, std::string("'") + key + "' is over " + std::to_string(max_bytes) + " bytes");
  *out = v->get<std::string>();
  return std::nullopt;
}

// The required "model": a non-empty string (whether it is served, the route checks).
std::optional<ApiError> get_model(const Json& body, std::string* out) {
  const Json* model = json_member(body, "model");
  if (!model || !model->is_string() || model->get_ref<const std::string&>().empty())
    return bad_request("model", "'model' is required and must be a non-empty string");
  *out = model->get<std::string>();
  return std::nullopt;
}

// An optional agent name (server/openai_protocol.h: check_speaker_name).
std::optional<ApiError> get_name(const Json& body, std::string* out) {
  if (auto e = get_string(body, "name", 64, out)) return e;
  if (const Json* v = json_member(body, "name"); v && !v->is_null()) return check_speaker_name(*out, "name");
  return std::nullopt;
}

std::optional<ApiError> get_ttl(const Json& body, const AgentLimits& al, std::optional<double>* out) {
  std::optional<double> ttl;
  if (auto e = get_number(body, "ttl_seconds", 1, al.max_ttl_s, &ttl)) return e;
  *out = ttl;
  return std::nullopt;
}

const std::set<std::string> kGenerationKeys = {"max_tokens", "temperature", "top_p", "seed", "stop"};

std::set<std::string> with_generation(std::set<std::string> keys) {
  keys.insert(kGenerationKeys.begin(), kGenerationKeys.end());
  return keys;
}

}  // namespace

std::optional<ApiError> parse_agent_create(const Json& body, const ApiLimits& limits, const AgentLimits& al,
                                           AgentCreateRequest* out) {
  if (auto e = only_fields(body, {"model", "name", "system", "messages", "ttl_seconds", "prefill"})) return e;
  AgentCreateRequest r;
  if (auto e = get_model(body, &r.model)) return e;
  if (auto e = get_name(body, &r.name)) return e;
  std::string system;
  if (auto e = get_string(body, "system", limits.max_prompt_bytes, &system)) return e;
  if (!system.empty()) r.messages.push_back(ChatMessage{"system", system});
  if (const Json* msgs = json_member(body, "messages"); msgs && !msgs->is_null()) {
    std::vector<ChatMessage> more;
    if (auto e = parse_messages(msgs, "messages", limits, &more)) return e;
    if (!system.empty())
      for (size_t i = 0; i < more.size(); ++i)
        if (more[i].role == "system")
          return bad_request("messages[" + std::to_string(i) + "].role", "'system' is given, so messages must not hold another system message");
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
  if (auto e = parse_messages(json_member(body, "messages"), "messages", limits, &msgs)) return e;
  *out = std::move(msgs);
  return std::nullopt;
}

std::optional<ApiError> parse_agent_respond(const Json& body, const ApiLimits& limits, AgentRespondRequest* out) {
  if (auto e = only_fields(body, with_generation({"messages"}))) return e;
  AgentRespondRequest r;
  if (const Json* msgs = json_member(body, "messages"); msgs && !msgs->is_null())
    if (auto e = parse_messages(msgs, "messages", limits, &r.messages)) return e;
  if (auto e = parse_sampling(body, limits, 1, &r.gen)) return e;
  *out = std::move(r);
  return std::nullopt;
}

std::optional<ApiError> parse_agent_fork(const Json& body, const AgentLimits& al, AgentForkRequest* out) {
  if (auto e = only_fields(body, {"name", "ttl_seconds"})) return e;
  AgentForkRequest r;
  if (auto e = get_name(body, &r.name)) return e;
  if (auto e = get_ttl(body, al, &r.ttl_s)) return e;
  *out = std::move(r);
  return std::nullopt;
}

std::optional<ApiError> parse_agent_transfer(const Json& body, AgentTransferRequest* out) {
  if (auto e = only_fields(body, {"model", "name", "native_last", "native_share", "recompute", "rare_share",
                                  "rare_max_tokens"}))
    return e;
  AgentTransferRequest r;
  if (auto e = get_model(body, &r.model)) return e;
  if (auto e = get_name(body, &r.name)) return e;
  std::optional<int64_t> native_last;
  if (auto e = get_int(body, "native_last", 0, kMaxNativeLast, &native_last)) return e;
  std::optional<double> native_share;
  if (auto e = get_number(body, "native_share", 0.0, 1.0, &native_share)) return e;
  // The defaults together or not at all: a request that names one suffix asks for that one.
  const bool named = native_last.has_value() || native_share.has_value();
  r.native_last = native_last.value_or(named ? 0 : kDefaultNativeLast);
  r.native_share = native_share.value_or(named ? 0.0 : kDefaultNativeShare);
  std::optional<double> recompute;
  if (auto e = get_number(body, "recompute", 0.0, 1.0, &recompute)) return e;
  r.recompute = recompute.value_or(0.0);
  std::optional<double> rare_share;
  if (auto e = get_number(body, "rare_share", 0.0, 1.0, &rare_share)) return e;
  r.rare_share = rare_share.value_or(0.0);
  std::optional<int64_t> rare_max;
  if (auto e = get_int(body, "rare_max_tokens", 1, kMaxNativeLast, &rare_max)) return e;
  if (rare_max && r.rare_share <= 0)
    return bad_request("rare_max_tokens", "'rare_max_tokens' caps the tokens 'rare_share' recomputes; ask for "
                                          "'rare_share' too");
  r.rare_max_tokens = rare_max.value_or(0);
  r.hybrid_named = named || recompute || rare_share || rare_max;
  *out = std::move(r);
  return std::nullopt;
}

void choose_default_hybrid(AgentTransferRequest* r, bool map_has_counts) {
  if (r->hybrid_named || !map_has_counts) return;
  r->native_last = 0;
  r->native_share = kDefaultRareNativeShare;
  r->rare_share = kDefaultRareShare;
  r->rare_max_tokens = kDefaultRareMaxTokens;
}

Json transfer_summary_json(const TransferSummary& t) {
  Json j = {{"method", t.method},
            {"from_model", t.from_model},
            {"context_tokens", t.context_tokens},
            {"sender_tokens", t.sender_tokens},
            {"transferred_tokens", t.transferred_tokens},
            {"native_tokens", t.native_tokens},
            {"native_last", t.native_last},
            {"native_share", t.native_share},
            {"recompute", t.recompute},
            {"rare_share", t.rare_share},
            {"rare_max_tokens", t.rare_max_tokens},
            {"recomputed_tokens", t.recomputed_tokens},
            {"check_layers", t.check_layers},
            {"native_work", t.native_work},
            {"seconds", t.seconds}};
  j["native_prefill_seconds_estimate"] =
      t.native_prefill_seconds_estimate ? Json(*t.native_prefill_seconds_estimate) : Json(nullptr);
  return j;
}

std::optional<ApiError> parse_step_score(const Json& body, const ApiLimits& limits, const AgentLimits& al,
                                         StepScoreRequest* out) {
  if (auto e = only_fields(body, {"steps", "prefix"})) return e;
  StepScoreRequest r;
  const Json* steps = json_member(body, "steps");
  if (!steps || !steps->is_array() || steps->empty())
    return bad_request("steps", "'steps' is required and must be a non-empty array of step texts");
  if (steps->size() > al.max_score_steps)
    return bad_request("steps", "'steps' holds more than " + std::to_string(al.max_score_steps) + " steps");
  for (size_t i = 0; i < steps->size(); ++i) {
    const Json& s = (*steps)[i];
    const std::string at = "steps[" + std::to_string(i) + "]";
    if (!s.is_string()) return bad_request(at, "'" + at + "' must be a string");
    const std::string& text = s.get_ref<const std::string&>();
    if (text.find_first_not_of(" \t\r\n") == std::string::npos) return bad_request(at, "'" + at + "' is empty");
    if (text.size() > limits.max_prompt_bytes)
      return bad_request(at, "'" + at + "' is over " + std::to_string(limits.max_prompt_bytes) + " bytes");
    r.steps.push_back(text);
  }
  if (auto e = get_string(body, "prefix", limits.max_prompt_bytes, &r.prefix)) return e;
  *out = std::move(r);
  return std::nullopt;
}

Json step_scores_json(const StepScoreReply& r) {
  Json scores = Json::array();
  for (size_t i = 0; i < r.scores.size(); ++i) {
    const StepScore& s = r.scores[i];
    // logodds is NaN when the head reads no logits: written as null (as dump_json writes any NaN).
    scores.push_back({{"index", i}, {"probability", s.probability}, {"score", s.score},
                      {"logodds", std::isfinite(s.logodds) ? Json(s.logodds) : Json()}, {"tokens", s.tokens}});
  }
  Json v = {{"kind", r.verifier}};
  if (r.feature_layer > 0) v["layer"] = r.feature_layer;
  return {{"object", "agent.step_scores"},
          {"agent", r.agent},
          {"verifier", std::move(v)},
          {"scores", std::move(scores)},
          {"usage", {{"context_tokens", r.context_tokens}, {"cached_tokens", r.cached_tokens}}},
          {"scoring_seconds", r.seconds}};
}

std::optional<ApiError> parse_round(const Json& body, const ApiLimits& limits, const AgentLimits& al, RoundRequest* out) {
  if (auto e = only_fields(body, with_generation({"agents", "shared", "instruction", "kv_sharing", "recompute"}))) return e;
  RoundRequest r;
  const Json* agents = json_member(body, "agents");
  if (!agents || !agents->is_array() || agents->empty())
    return bad_request("agents", "'agents' is required and must be a non-empty array of agent ids");
  if (agents->size() > al.max_round_agents)
    return bad_request("agents", "'agents' lists more than " + std::to_string(al.max_round_agents) + " agents");
  std::set<std::string> seen;
  for (const Json& a : *agents) {
    if (!a.is_string() || a.get_ref<const std::string&>().empty()) return bad_request("agents", "'agents' must hold agent id strings");
    const std::string& id = a.get_ref<const std::string&>();
    if (!seen.insert(id).second) return bad_request("agents", "agent '" + excerpt(id) + "' is listed twice");
    r.agents.push_back(id);
  }
  if (const Json* shared = json_member(body, "shared"); shared && !shared->is_null()) {
    std::string text;
    if (auto e = get_string(body, "shared", limits.max_prompt_bytes, &text)) return e;
    r.shared = std::move(text);
  }
  if (auto e = get_string(body, "instruction", limits.max_prompt_bytes, &r.instruction)) return e;
  if (const Json* v = json_member(body, "kv_sharing"); v && !v->is_null()) {
    if (!v->is_boolean()) return bad_request("kv_sharing", "'kv_sharing' must be true or false");
    r.kv_sharing = v->get<bool>();
  }
  if (const Json* v = json_member(body, "recompute"); v && !v->is_null()) {
    if (!v->is_number() || !(v->get<double>() >= 0.0 && v->get<double>() <= 1.0))
      return bad_request("recompute", "'recompute' must be a number in [0, 1] (the share of the shared block recomputed)");
    r.recompute = v->get<double>();
  }
  if (auto e = parse_sampling(body, limits, 1, &r.gen)) return e;
  *out = std::move(r);
  return std::nullopt;
}

Json agent_json(const AgentView& a) {
  return {{"id", a.id},           {"object", "agent"},
          {"name", a.name},       {"model", a.model},
          {"created", a.created}, {"expires_at", a.expires_at},
          {"messages", a.n_messages}, {"resident_tokens", a.resident_tokens},
          {"busy", a.busy}};
}

namespace {

// One message as /v1/chat/completions takes it (parse_messages reads it back).
Json chat_message_json(const ChatMessage& m) {
  Json j = {{"role", m.role}, {"content", m.content}};
  if (!m.name.empty()) j["name"] = m.name;
  if (!m.tool_call_id.empty()) j["tool_call_id"] = m.tool_call_id;
  if (!m.tool_calls.empty()) {
    Json calls = Json::array();
    for (const ChatToolCall& c : m.tool_calls)
      calls.push_back({{"id", c.id}, {"type", "function"}, {"function", {{"name", c.name}, {"arguments", c.arguments}}}});
    j["tool_calls"] = std::move(calls);
  }
  return j;
}

}  // namespace

Json agent_export_json(const AgentExport& a) {
  Json msgs = Json::array();
  for (const ChatMessage& m : a.messages) msgs.push_back(chat_message_json(m));
  return {{"object", "agent.export"},
          {"format", kAgentExportFormat},
          {"id", a.id},
          {"name", a.name},
          {"model", a.model},
          {"ttl_seconds", a.ttl_s},
          {"messages", std::move(msgs)},
          {"segments", a.segments},
          {"last_answer", a.last_answer},
          {"resident_tokens", a.resident_tokens},
          {"kv", {{"published_blocks", a.published_blocks}, {"published", a.published}}}};
}

std::optional<ApiError> parse_agent_import(const Json& body, const ApiLimits& limits, const AgentLimits& al,
                                           AgentExport* out) {
  if (auto e = only_fields(body, {"object", "format", "id", "name", "model", "ttl_seconds", "messages", "segments",
                                  "last_answer", "resident_tokens", "kv"}))
    return e;
  AgentExport r;
  const Json* object = json_member(body, "object");
  if (!object || *object != "agent.export")
    return bad_request("object", "'object' must be \"agent.export\" (the body of GET /v1/agents/{id}/export)");
  const Json* format = json_member(body, "format");
  if (!format || !format->is_number_integer() || *format != kAgentExportFormat)
    return bad_request("format", "'format' must be " + std::to_string(kAgentExportFormat) +
                                     ", the export format this server reads");
  if (auto e = get_string(body, "id", 256, &r.id)) return e;
  if (auto e = get_name(body, &r.name)) return e;
  if (auto e = get_model(body, &r.model)) return e;
  std::optional<double> ttl;
  if (auto e = get_ttl(body, al, &ttl)) return e;
  r.ttl_s = ttl ? *ttl : al.default_ttl_s;
  if (const Json* msgs = json_member(body, "messages"); msgs && !msgs->is_null() && !(msgs->is_array() && msgs->empty()))
    if (auto e = parse_messages(msgs, "messages", limits, &r.messages)) return e;
  if (const Json* segs = json_member(body, "segments"); segs && !segs->is_null()) {
    if (!segs->is_array()) return bad_request("segments", "'segments' must be an array of strings");
    // Each is a round's shared block, also inside the messages: the text budget bounds them all.
    if (segs->size() > 4096) return bad_request("segments", "'segments' holds over 4096 entries");
    for (size_t i = 0; i < segs->size(); ++i) {
      const Json& s = (*segs)[i];
      const std::string p = "segments[" + std::to_string(i) + "]";
      if (!s.is_string()) return bad_request(p, "'" + p + "' must be a string");
      if (s.get_ref<const std::string&>().size() > limits.max_prompt_bytes)
        return bad_request(p, "'" + p + "' is over " + std::to_string(limits.max_prompt_bytes) + " bytes");
      r.segments.push_back(s.get<std::string>());
    }
  }
  if (auto e = get_string(body, "last_answer", limits.max_prompt_bytes, &r.last_answer)) return e;
  std::optional<int64_t> resident;
  if (auto e = get_int(body, "resident_tokens", 0, int64_t(1) << 40, &resident)) return e;
  r.resident_tokens = resident.value_or(0);
  // "kv" is information only (the exporter's publishing), but what it holds must still be what the
  // document format says: a count that is a non-negative integer and a boolean.
  if (const Json* kv = json_member(body, "kv"); kv && !kv->is_null()) {
    if (!kv->is_object()) return bad_request("kv", "'kv' must be an object");
    if (const Json* n = json_member(*kv, "published_blocks")) {
      const bool count = n->is_number_unsigned() || (n->is_number_integer() && n->get<int64_t>() >= 0) ||
                         (n->is_number_float() && n->get<double>() >= 0 && n->get<double>() < 9.0e18 &&
                          std::floor(n->get<double>()) == n->get<double>());
      if (!count)
        return bad_request("kv.published_blocks", "'kv.published_blocks' must be a non-negative integer");
    }
    if (const Json* b = json_member(*kv, "published"); b && !b->is_boolean())
      return bad_request("kv.published", "'kv.published' must be true or false");
  }
  *out = std::move(r);
  return std::nullopt;
}

Json agent_answer_json(const AgentAnswer& a) {
  return {{"agent", a.agent},
          {"name", a.name},
          {"message", {{"role", "assistant"}, {"content", a.content}}},
          {"finish_reason", a.finish_reason},
          {"usage", a.usage}};
}

Json round_sharing_json(const RoundSharingReport& r) {
  Json j = {{"mode", r.mode}};
  if (!r.reason.empty()) j["reason"] = r.reason;
  if (r.mode == "tokendance") {
    j["recompute"] = r.recompute;
    j["agents"] = r.agents;
    j["segment_tokens"] = r.segment_tokens;
    j["recomputed_tokens"] = r.recomputed_tokens;
    j["master_tokens_computed"] = r.master_tokens_computed;
    j["master_context"] = r.master_context;
    j["collector_seconds"] = r.collector_seconds;
    j["waves"] = r.waves;
  }
  return j;
}

}  // namespace agentkv
