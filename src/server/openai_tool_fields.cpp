// The OpenAI protocol's tool and structured-output fields (server/openai_protocol.h): tools,
// tool_choice, parallel_tool_calls and response_format read into ToolSpec / ToolChoice /
// ResponseFormat, every error naming its path; and the policy for fields agentkv does not know
// (ignored and reported, or refused under --strict-api), with the log that names each one once.
// Compiling a schema into a grammar is not done here: the route does it, and reports its errors.
#include <cctype>
#include <cstdio>
#include <mutex>
#include <set>

#include "server/openai_protocol.h"

namespace agentkv {

namespace {

// "messages[12].tool_calls[0].x" -> "messages[].tool_calls[].x": one name per kind of field.
std::string field_kind(const std::string& path) {
  std::string out;
  for (size_t i = 0; i < path.size(); ++i) {
    out += path[i];
    if (path[i] != '[') continue;
    size_t j = i + 1;
    while (j < path.size() && std::isdigit(static_cast<unsigned char>(path[j]))) ++j;
    if (j < path.size() && path[j] == ']' && j > i + 1) i = j - 1;
  }
  return out;
}

// An optional member that must be a string / an object / a bool when present and not null.
std::optional<ApiError> opt_type(const Json& obj, const char* key, const std::string& path, Json::value_t want,
                                 const char* what) {
  const Json* v = json_member(obj, key);
  if (!v || v->is_null() || v->type() == want) return std::nullopt;
  return bad_request(path, "'" + path + "' must be " + what);
}

std::optional<ApiError> name_member(const Json& obj, const std::string& path, std::string* out) {
  const Json* v = json_member(obj, "name");
  if (!v || !v->is_string() || !valid_function_name(v->get_ref<const std::string&>()))
    return bad_request(path, "'" + path + "' is required and must match [a-zA-Z0-9_-]{1,64}");
  *out = v->get<std::string>();
  return std::nullopt;
}

// One tools[i]: {"type": "function", "function": {"name", "description", "parameters", "strict"}}.
std::optional<ApiError> parse_tool(const Json& t, const std::string& p, std::vector<std::string>* ignored, ToolSpec* out) {
  if (!t.is_object()) return bad_request(p, "'" + p + "' must be an object");
  if (auto e = check_members(t, p, {"type", "function"}, ignored)) return e;
  const Json* type = json_member(t, "type");
  if (!type || *type != "function")
    return bad_request(p + ".type", "'" + p + ".type' must be 'function' (agentkv supports function tools only)");
  const Json* f = json_member(t, "function");
  const std::string pf = p + ".function";
  if (!f || !f->is_object()) return bad_request(pf, "'" + pf + "' is required and must be an object");
  if (auto e = check_members(*f, pf, {"name", "description", "parameters", "strict"}, ignored)) return e;
  if (auto e = name_member(*f, pf + ".name", &out->name)) return e;
  if (auto e = opt_type(*f, "description", pf + ".description", Json::value_t::string, "a string")) return e;
  if (auto e = opt_type(*f, "parameters", pf + ".parameters", Json::value_t::object, "an object (a JSON Schema)"))
    return e;
  if (auto e = get_bool(*f, "strict", &out->strict)) return bad_request(pf + ".strict", "'" + pf + ".strict' must be true or false");
  if (const Json* d = json_member(*f, "description"); d && d->is_string()) out->description = d->get<std::string>();
  if (const Json* s = json_member(*f, "parameters"); s && s->is_object()) out->parameters = *s;
  return std::nullopt;
}

// "tool_choice": "none" | "auto" | "required" | {"type": "function", "function": {"name"}}.
std::optional<ApiError> parse_tool_choice(const Json& tc, std::vector<std::string>* ignored, CompletionRequest* r) {
  if (tc.is_string()) {
    const std::string& s = tc.get_ref<const std::string&>();
    if (s == "none") r->tool_choice = ToolChoice::kNone;
    else if (s == "auto") r->tool_choice = ToolChoice::kAuto;
    else if (s == "required") r->tool_choice = ToolChoice::kRequired;
    else return bad_request("tool_choice", "'tool_choice' must be none, auto, required or {\"type\": \"function\", ...}");
  } else if (tc.is_object()) {
    if (auto e = check_members(tc, "tool_choice", {"type", "function"}, ignored)) return e;
    const Json* type = json_member(tc, "type");
    if (!type || *type != "function") return bad_request("tool_choice.type", "'tool_choice.type' must be 'function'");
    const Json* f = json_member(tc, "function");
    if (!f || !f->is_object())
      return bad_request("tool_choice.function", "'tool_choice.function' is required and must be an object");
    if (auto e = check_members(*f, "tool_choice.function", {"name"}, ignored)) return e;
    if (auto e = name_member(*f, "tool_choice.function.name", &r->tool_choice_name)) return e;
    r->tool_choice = ToolChoice::kFunction;
  } else {
    return bad_request("tool_choice", "'tool_choice' must be a string or an object");
  }
  if (r->tool_choice != ToolChoice::kNone && r->tools.empty())
    return bad_request("tool_choice", "'tool_choice' other than none needs 'tools'");
  if (r->tool_choice == ToolChoice::kFunction) {
    bool found = false;
    for (const ToolSpec& t : r->tools) found = found || t.name == r->tool_choice_name;
    if (!found)
      return bad_request("tool_choice.function.name", "'tool_choice.function.name': '" + r->tool_choice_name + "' is not in 'tools'");
  }
  return std::nullopt;
}

}  // namespace

std::optional<ApiError> unknown_field(const std::string& path, std::vector<std::string>* ignored) {
  if (!ignored) return bad_request(excerpt(path), "unknown field '" + excerpt(path) + "'");
  std::string kind = field_kind(path);
  for (const std::string& f : *ignored)
    if (f == kind) return std::nullopt;
  // Frameworks add a few fields; a body of thousands of made-up keys is not a framework, and
  // remembering them all would cost time and memory per key.
  constexpr size_t kMaxIgnored = 64;
  if (ignored->size() >= kMaxIgnored)
    return bad_request(path, "the request has more than " + std::to_string(kMaxIgnored) + " fields agentkv does not know (the " +
                         std::to_string(kMaxIgnored + 1) + "th: '" + path + "')");
  ignored->push_back(std::move(kind));
  return std::nullopt;
}

std::optional<ApiError> check_members(const Json& obj, const std::string& path, std::initializer_list<const char*> known,
                                      std::vector<std::string>* ignored) {
  for (const auto& [key, value] : obj.items()) {
    bool is_known = false;
    for (const char* k : known) is_known = is_known || key == k;
    if (!is_known)
      if (auto e = unknown_field(path.empty() ? key : path + "." + key, ignored)) return e;
  }
  return std::nullopt;
}

bool valid_function_name(const std::string& name) {
  if (name.empty() || name.size() > 64) return false;
  for (unsigned char c : name)
    if (!std::isalnum(c) && c != '_' && c != '-') return false;
  return true;
}

std::optional<ApiError> parse_tools(const Json& body, const ApiLimits& limits, std::vector<std::string>* ignored,
                                    CompletionRequest* out) {
  if (const Json* tools = json_member(body, "tools"); tools && !tools->is_null()) {
    if (!tools->is_array()) return bad_request("tools", "'tools' must be an array");
    if (tools->size() > limits.max_tools)
      return bad_request("tools", "'tools' holds more than " + std::to_string(limits.max_tools) + " tools");
    std::set<std::string> names;
    for (size_t i = 0; i < tools->size(); ++i) {
      const std::string p = "tools[" + std::to_string(i) + "]";
      ToolSpec t;
      if (auto e = parse_tool((*tools)[i], p, ignored, &t)) return e;
      if (!names.insert(t.name).second)
        return bad_request(p + ".function.name", "'" + p + ".function.name': '" + t.name + "' is given twice");
      out->tools.push_back(std::move(t));
    }
  }
  out->tool_choice = out->tools.empty() ? ToolChoice::kNone : ToolChoice::kAuto;
  if (const Json* tc = json_member(body, "tool_choice"); tc && !tc->is_null())
    if (auto e = parse_tool_choice(*tc, ignored, out)) return e;
  return get_bool(body, "parallel_tool_calls", &out->parallel_tool_calls);
}

std::optional<ApiError> parse_response_format(const Json* rf, std::vector<std::string>* ignored, ResponseFormat* out) {
  ResponseFormat f;
  if (!rf || rf->is_null()) {
    *out = f;
    return std::nullopt;
  }
  if (!rf->is_object()) return bad_request("response_format", "'response_format' must be an object");
  if (auto e = check_members(*rf, "response_format", {"type", "json_schema"}, ignored)) return e;
  const Json* type = json_member(*rf, "type");
  if (type && *type == "text") f.kind = ResponseFormat::Kind::kText;
  else if (type && *type == "json_object") f.kind = ResponseFormat::Kind::kJsonObject;
  else if (type && *type == "json_schema") f.kind = ResponseFormat::Kind::kJsonSchema;
  else return bad_request("response_format.type", "'response_format.type' must be text, json_object or json_schema");
  const Json* js = json_member(*rf, "json_schema");
  if (f.kind != ResponseFormat::Kind::kJsonSchema) {
    if (js && !js->is_null())
      return bad_request("response_format.json_schema", "'response_format.json_schema' needs 'type': 'json_schema'");
    *out = f;
    return std::nullopt;
  }
  const std::string p = "response_format.json_schema";
  if (!js || !js->is_object()) return bad_request(p, "'" + p + "' is required and must be an object");
  if (auto e = check_members(*js, p, {"name", "description", "schema", "strict"}, ignored)) return e;
  if (auto e = name_member(*js, p + ".name", &f.name)) return e;
  if (auto e = opt_type(*js, "description", p + ".description", Json::value_t::string, "a string")) return e;
  if (auto e = opt_type(*js, "schema", p + ".schema", Json::value_t::object, "an object (a JSON Schema)")) return e;
  if (auto e = get_bool(*js, "strict", &f.strict)) return bad_request(p + ".strict", "'" + p + ".strict' must be true or false");
  if (const Json* d = json_member(*js, "description"); d && d->is_string()) f.description = d->get<std::string>();
  if (const Json* s = json_member(*js, "schema"); s && s->is_object()) f.schema = *s;
  *out = std::move(f);
  return std::nullopt;
}

void log_ignored_fields_once(const std::vector<std::string>& fields) {
  // Bounded so that a client inventing names cannot grow it; past the bound new names go unlogged.
  constexpr size_t kMaxRemembered = 256;
  static std::mutex mu;
  static std::set<std::string> seen;
  std::lock_guard<std::mutex> lock(mu);
  for (const std::string& f : fields) {
    if (seen.size() >= kMaxRemembered) return;
    std::string shown = f.substr(0, 80);  // printable: a name is client text
    for (char& c : shown)
      if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
    if (!seen.insert(shown).second) continue;
    std::fprintf(stderr, "agentkv: ignoring request field '%s' (first use)\n", shown.c_str());
  }
}

}  // namespace agentkv
