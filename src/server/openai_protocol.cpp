// The OpenAI protocol (server/openai_protocol.h): field readers, messages, the one sampling-field
// parser, the completion request parser and the response / stream-chunk JSON. tools, tool_choice,
// response_format and the unknown-field policy are in openai_tool_fields.cpp.
#include "server/openai_protocol.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <set>

namespace agentkv {

namespace {

// A range bound as the error message shows it: 2, not 2.0.
std::string bound_text(double d) {
  if (d == std::floor(d) && std::fabs(d) < 1e15) return std::to_string(int64_t(d));
  return dump_json(Json(d));
}

std::string range_message(const char* key, const std::string& lo, const std::string& hi) {
  return std::string("'") + key + "' must be in [" + lo + ", " + hi + "]";
}

// v (a number) as an integer in [lo, hi]; an error names the key. Integers compare exactly; a float
// must be finite, in range and without a fraction.
std::optional<ApiError> read_int(const Json& v, const char* key, int64_t lo, int64_t hi, int64_t* out) {
  const std::string range = range_message(key, std::to_string(lo), std::to_string(hi));
  if (v.is_number_unsigned()) {
    const uint64_t u = v.get<uint64_t>();
    if (u > uint64_t(std::numeric_limits<int64_t>::max()) || int64_t(u) > hi || int64_t(u) < lo) return bad_request(key, range);
    *out = int64_t(u);
    return std::nullopt;
  }
  if (v.is_number_integer()) {
    const int64_t i = v.get<int64_t>();
    if (i < lo || i > hi) return bad_request(key, range);
    *out = i;
    return std::nullopt;
  }
  // A number the parser kept as a double is fractional, has an exponent, or did not fit 64 bits. One
  // at or past 2^53 is not an exact integer (-9223372036854775809 reads as -2^63), so it is out of
  // range whatever the bounds: never a silently rounded value, nor an out-of-range cast.
  const double d = v.get<double>();
  if (std::isfinite(d) && d != std::floor(d)) return bad_request(key, std::string("'") + key + "' must be an integer");
  if (!std::isfinite(d) || std::fabs(d) >= 9007199254740992.0 || d < double(lo) || d > double(hi)) return bad_request(key, range);
  *out = int64_t(d);
  return std::nullopt;
}

}  // namespace

std::optional<ApiError> get_number(const Json& body, const char* key, double lo, double hi, std::optional<double>* out) {
  const Json* v = json_member(body, key);
  if (!v || v->is_null()) return std::nullopt;
  if (!v->is_number()) return bad_request(key, std::string("'") + key + "' must be a number");
  const double d = v->get<double>();
  if (!std::isfinite(d) || d < lo || d > hi) return bad_request(key, range_message(key, bound_text(lo), bound_text(hi)));
  *out = d;
  return std::nullopt;
}

std::optional<ApiError> get_int(const Json& body, const char* key, int64_t lo, int64_t hi, std::optional<int64_t>* out) {
  const Json* v = json_member(body, key);
  if (!v || v->is_null()) return std::nullopt;
  if (!v->is_number()) return bad_request(key, std::string("'") + key + "' must be a number");
  int64_t i = 0;
  if (auto e = read_int(*v, key, lo, hi, &i)) return e;
  *out = i;
  return std::nullopt;
}

std::optional<ApiError> get_seed(const Json& body, const char* key, std::optional<uint64_t>* out) {
  const Json* v = json_member(body, key);
  if (!v || v->is_null()) return std::nullopt;
  if (!v->is_number()) return bad_request(key, std::string("'") + key + "' must be a number");
  if (v->is_number_unsigned()) {
    *out = v->get<uint64_t>();
    return std::nullopt;
  }
  int64_t i = 0;
  if (read_int(*v, key, std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max(), &i))
    return bad_request(key, range_message(key, std::to_string(std::numeric_limits<int64_t>::min()),
                                  std::to_string(std::numeric_limits<uint64_t>::max())));
  *out = uint64_t(i);
  return std::nullopt;
}

std::optional<ApiError> get_bool(const Json& body, const char* key, bool* out) {
  const Json* v = json_member(body, key);
  if (!v || v->is_null()) return std::nullopt;
  if (!v->is_boolean()) return bad_request(key, std::string("'") + key + "' must be true or false");
  *out = v->get<bool>();
  return std::nullopt;
}

std::optional<ApiError> check_speaker_name(const std::string& name, const std::string& param) {
  auto allowed = [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-' ||
           c == '.' || c == ' ';
  };
  if (!name.empty() && name.size() <= 64 && name.front() != ' ' && name.back() != ' ' &&
      std::all_of(name.begin(), name.end(), allowed))
    return std::nullopt;
  return bad_request(param, "'" + param + "' must be 1 to 64 ASCII letters, digits, '_', '-', '.' or inner spaces (" +
                        std::to_string(name.size()) + " bytes given)");
}

std::string new_response_id(std::string_view prefix) {
  static constexpr char kBase62[] = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
  // Each thread's generator is seeded with 256 bits from the OS, so ids from different threads or
  // processes do not collide in practice (24 base62 characters are 142 bits).
  thread_local std::mt19937_64 rng = [] {
    std::random_device rd;
    std::seed_seq seq{rd(), rd(), rd(), rd(), rd(), rd(), rd(), rd()};
    return std::mt19937_64(seq);
  }();
  std::string id(prefix);
  id += '-';
  std::uniform_int_distribution<int> pick(0, 61);
  for (int i = 0; i < 24; ++i) id += kBase62[pick(rng)];
  return id;
}

// The text of a message's content: a string, or an array of {"type": "text", "text": ...} parts.
std::optional<ApiError> content_text(const Json& c, const std::string& param, std::string* out) {
  if (c.is_string()) {
    *out = c.get<std::string>();
    return std::nullopt;
  }
  if (!c.is_array()) return bad_request(param, "'" + param + "' must be a string or an array of text parts");
  out->clear();
  for (size_t i = 0; i < c.size(); ++i) {
    const std::string pp = param + "[" + std::to_string(i) + "]";
    const Json* type = json_member(c[i], "type");
    if (!type || !type->is_string()) return bad_request(pp + ".type", "'" + pp + ".type' is required and must be a string");
    const std::string& ts = type->get_ref<const std::string&>();
    if (ts == "image_url" || ts == "input_audio" || ts == "file" || ts == "image" || ts == "audio")
      return bad_request(pp, pp + ": '" + ts + "' parts are not supported by agentkv");
    if (ts != "text") return bad_request(pp + ".type", "'" + pp + ".type' must be 'text', not '" + excerpt(ts) + "'");
    const Json* text = json_member(c[i], "text");
    if (!text || !text->is_string()) return bad_request(pp + ".text", "'" + pp + ".text' is required and must be a string");
    *out += text->get_ref<const std::string&>();
  }
  return std::nullopt;
}

namespace {

// An optional string member (absent or null: *out unchanged).
std::optional<ApiError> get_string(const Json& obj, const char* key, const std::string& path, std::string* out) {
  const Json* v = json_member(obj, key);
  if (!v || v->is_null()) return std::nullopt;
  if (!v->is_string()) return bad_request(path, "'" + path + "' must be a string");
  *out = v->get<std::string>();
  return std::nullopt;
}

// An assistant message's "tool_calls": [{"id", "type": "function", "function": {"name", "arguments"}}].
std::optional<ApiError> parse_tool_calls(const Json& calls, const std::string& p, std::vector<std::string>* ignored,
                                         std::vector<ChatToolCall>* out) {
  if (!calls.is_array()) return bad_request(p, "'" + p + "' must be an array");
  for (size_t i = 0; i < calls.size(); ++i) {
    const Json& c = calls[i];
    const std::string pc = p + "[" + std::to_string(i) + "]";
    if (!c.is_object()) return bad_request(pc, "'" + pc + "' must be an object");
    if (auto e = check_members(c, pc, {"id", "type", "function"}, ignored)) return e;
    ChatToolCall call;
    if (auto e = get_string(c, "id", pc + ".id", &call.id)) return e;
    if (call.id.empty()) return bad_request(pc + ".id", "'" + pc + ".id' is required and must be a non-empty string");
    if (const Json* type = json_member(c, "type"); type && !type->is_null() && *type != "function")
      return bad_request(pc + ".type", "'" + pc + ".type' must be 'function'");
    const Json* f = json_member(c, "function");
    if (!f || !f->is_object()) return bad_request(pc + ".function", "'" + pc + ".function' is required and must be an object");
    if (auto e = check_members(*f, pc + ".function", {"name", "arguments"}, ignored)) return e;
    if (auto e = get_string(*f, "name", pc + ".function.name", &call.name)) return e;
    if (!valid_function_name(call.name))
      return bad_request(pc + ".function.name", "'" + pc + ".function.name' is required and must match [a-zA-Z0-9_-]{1,64}");
    const Json* args = json_member(*f, "arguments");
    if (!args || !args->is_string())
      return bad_request(pc + ".function.arguments", "'" + pc + ".function.arguments' is required and must be a string (JSON text)");
    call.arguments = args->get<std::string>();
    out->push_back(std::move(call));
  }
  return std::nullopt;
}

}  // namespace

std::optional<ApiError> parse_messages(const Json* msgs, const std::string& param, const ApiLimits& limits,
                                       std::vector<ChatMessage>* out, std::vector<std::string>* ignored) {
  if (!msgs || !msgs->is_array() || msgs->empty())
    return bad_request(param, "'" + param + "' is required and must be a non-empty array");
  size_t bytes = 0;
  for (size_t i = 0; i < msgs->size(); ++i) {
    const Json& m = (*msgs)[i];
    const std::string p = param + "[" + std::to_string(i) + "]";
    if (!m.is_object()) return bad_request(p, "'" + p + "' must be an object");
    for (const char* refused : {"audio", "function_call"})
      if (const Json* v = json_member(m, refused); v && !v->is_null())
        return bad_request(p + "." + refused, "'" + p + "." + refused + "' is not supported by agentkv");
    // annotations: what the official client echoes back from a reply (URL citations); no meaning as input.
    if (auto e = check_members(m, p, {"role", "content", "name", "tool_calls", "tool_call_id", "refusal", "audio",
                                      "function_call", "annotations"}, ignored))
      return e;
    const Json* role = json_member(m, "role");
    if (!role || !role->is_string()) return bad_request(p + ".role", "'" + p + ".role' is required");
    const std::string& rs = role->get_ref<const std::string&>();
    if (rs != "system" && rs != "user" && rs != "assistant" && rs != "developer" && rs != "tool")
      return bad_request(p + ".role", "'" + p + ".role' must be system, developer, user, assistant or tool");
    ChatMessage cm;
    cm.role = rs == "developer" ? "system" : rs;
    if (auto e = get_string(m, "name", p + ".name", &cm.name)) return e;
    if (const Json* v = json_member(m, "name"); v && !v->is_null())
      if (auto e = check_speaker_name(cm.name, p + ".name")) return e;
    const Json* calls = json_member(m, "tool_calls");
    if (calls && !calls->is_null()) {
      if (rs != "assistant") return bad_request(p + ".tool_calls", "'" + p + ".tool_calls' is only allowed on assistant messages");
      if (auto e = parse_tool_calls(*calls, p + ".tool_calls", ignored, &cm.tool_calls)) return e;
    }
    if (const Json* v = json_member(m, "refusal"); v && !v->is_null()) {
      if (rs != "assistant") return bad_request(p + ".refusal", "'" + p + ".refusal' is only allowed on assistant messages");
      if (!v->is_string()) return bad_request(p + ".refusal", "'" + p + ".refusal' must be a string");
    }
    if (const Json* v = json_member(m, "tool_call_id"); v && !v->is_null()) {
      if (rs != "tool") return bad_request(p + ".tool_call_id", "'" + p + ".tool_call_id' is only allowed on tool messages");
      if (auto e = get_string(m, "tool_call_id", p + ".tool_call_id", &cm.tool_call_id)) return e;
    }
    if (rs == "tool" && cm.tool_call_id.empty())
      return bad_request(p + ".tool_call_id", "'" + p + ".tool_call_id' is required on tool messages (a non-empty string)");
    const Json* content = json_member(m, "content");
    if (!content || content->is_null()) {
      if (cm.tool_calls.empty()) return bad_request(p + ".content", "'" + p + ".content' is required");
    } else if (auto e = content_text(*content, p + ".content", &cm.content)) {
      return e;
    }
    bytes += cm.content.size();
    for (const ChatToolCall& c : cm.tool_calls) bytes += c.arguments.size();
    out->push_back(std::move(cm));
  }
  if (bytes > limits.max_prompt_bytes)
    return bad_request(param, "the messages hold " + std::to_string(bytes) + " bytes, over the limit of " +
                          std::to_string(limits.max_prompt_bytes));
  return std::nullopt;
}

std::optional<ApiError> parse_stop(const Json* stop, const ApiLimits& limits, std::vector<std::string>* out) {
  if (!stop || stop->is_null()) return std::nullopt;
  if (stop->is_string()) {
    out->push_back(stop->get<std::string>());
  } else if (stop->is_array()) {
    for (const Json& s : *stop) {
      if (!s.is_string()) return bad_request("stop", "'stop' must be a string or an array of strings");
      out->push_back(s.get<std::string>());
    }
  } else {
    return bad_request("stop", "'stop' must be a string or an array of strings");
  }
  if (int(out->size()) > limits.max_stop)
    return bad_request("stop", "'stop' holds more than " + std::to_string(limits.max_stop) + " strings");
  for (auto& s : *out)
    if (s.empty()) return bad_request("stop", "'stop' strings must not be empty");
  return std::nullopt;
}

namespace {

// OpenAI's "logit_bias": {"<token id>": bias in [-100, 100], ...}, into pairs sorted by id. Ids are
// written in decimal without leading zeros, so two keys never name one token.
std::optional<ApiError> parse_logit_bias(const Json* lb, const ApiLimits& limits, std::vector<std::pair<int32_t, float>>* out) {
  if (!lb || lb->is_null()) return std::nullopt;
  if (!lb->is_object()) return bad_request("logit_bias", "'logit_bias' must be an object of token ids to numbers");
  if (lb->size() > limits.max_logit_bias)
    return bad_request("logit_bias", "'logit_bias' holds more than " + std::to_string(limits.max_logit_bias) + " entries");
  for (const auto& [key, v] : lb->items()) {
    const std::string p = "logit_bias." + key;
    const bool digits = !key.empty() && key.size() <= 10 && (key == "0" || key[0] != '0') &&
                        std::all_of(key.begin(), key.end(), [](char c) { return c >= '0' && c <= '9'; });
    const int64_t id = digits ? std::stoll(key) : -1;
    if (id < 0 || id > std::numeric_limits<int32_t>::max())
      return bad_request(p, "'" + p + "': the keys of 'logit_bias' must be token ids (non-negative integers)");
    if (!v.is_number()) return bad_request(p, "'" + p + "' must be a number");
    const double b = v.get<double>();
    if (!(b >= -100 && b <= 100)) return bad_request(p, "'" + p + "' must be in [-100, 100]");
    out->emplace_back(int32_t(id), float(b));
  }
  std::sort(out->begin(), out->end());
  return std::nullopt;
}

}  // namespace

std::optional<ApiError> parse_sampling(const Json& body, const ApiLimits& limits, int min_max_tokens, SamplingFields* out) {
  SamplingFields f;
  std::optional<int64_t> mt;
  if (auto e = get_int(body, "max_tokens", min_max_tokens, limits.max_tokens_limit, &mt)) return e;
  if (mt) f.max_tokens = int(*mt);
  std::optional<double> temp, top_p;
  if (auto e = get_number(body, "temperature", 0, 2, &temp)) return e;
  if (temp) f.temperature = float(*temp);
  if (auto e = get_number(body, "top_p", 0, 1, &top_p)) return e;
  if (top_p) {
    if (*top_p <= 0) return bad_request("top_p", "'top_p' must be in (0, 1]");
    f.top_p = float(*top_p);
  }
  if (auto e = get_seed(body, "seed", &f.seed)) return e;
  if (auto e = parse_stop(json_member(body, "stop"), limits, &f.stop)) return e;
  std::optional<double> pres, freq;
  if (auto e = get_number(body, "presence_penalty", -2, 2, &pres)) return e;
  if (auto e = get_number(body, "frequency_penalty", -2, 2, &freq)) return e;
  if (pres) f.presence_penalty = float(*pres);
  if (freq) f.frequency_penalty = float(*freq);
  if (auto e = parse_logit_bias(json_member(body, "logit_bias"), limits, &f.logit_bias)) return e;
  *out = std::move(f);
  return std::nullopt;
}

void apply_sampling(const SamplingFields& s, RequestParams* p) {
  p->sampling.temperature = s.temperature;
  p->sampling.top_p = s.top_p;
  p->sampling.seed = s.seed ? *s.seed : std::random_device{}();
  p->sampling.presence_penalty = s.presence_penalty;
  p->sampling.frequency_penalty = s.frequency_penalty;
  p->sampling.logit_bias = s.logit_bias;
  p->stop = s.stop;
}

std::optional<ApiError> parse_completion_request(const Json& body, bool chat, const ApiLimits& limits,
                                                 CompletionRequest* out) {
  if (!body.is_object()) return bad_request("", "the request body must be a JSON object");
  CompletionRequest r;
  r.chat = chat;
  // The second line of kCommon: accepted, and without effect on the output (modalities only as ["text"]).
  static const std::set<std::string> kCommon = {"model", "max_tokens", "temperature", "top_p", "n", "seed", "stop",
                                                "stream", "stream_options", "logprobs", "presence_penalty",
                                                "frequency_penalty", "logit_bias",
                                                "user", "metadata", "store", "service_tier", "prompt_cache_key",
                                                "safety_identifier", "verbosity", "reasoning_effort", "modalities"};
  static const std::set<std::string> kChat = {"messages", "top_logprobs", "max_completion_tokens", "kv_sharing",
                                              "recompute", "tools", "tool_choice", "parallel_tool_calls",
                                              "response_format"};
  static const std::set<std::string> kCompletion = {"prompt", "echo"};
  // OpenAI's fields that would change the output and agentkv does not implement.
  static const std::set<std::string> kUnsupported = {"functions", "function_call", "audio", "prediction",
                                                     "web_search_options", "best_of", "suffix"};
  std::vector<std::string>* ignored = limits.strict_api ? nullptr : &r.ignored_fields;
  for (const auto& [key, value] : body.items()) {
    if (kCommon.count(key) || (chat ? kChat : kCompletion).count(key)) continue;
    // parallel_tool_calls changes nothing without tools, so on completions it is only an unknown field.
    const bool unsupported = kUnsupported.count(key) > 0,
               other_endpoint = (chat ? kCompletion : kChat).count(key) > 0 && key != "parallel_tool_calls";
    if ((unsupported || other_endpoint) && value.is_null()) continue;
    if (unsupported) return bad_request(key, "'" + key + "' is not supported by agentkv");
    if (other_endpoint)
      return bad_request(key, "'" + key + "' is a field of " + (chat ? "/v1/completions" : "/v1/chat/completions") + " only");
    if (auto e = unknown_field(key, ignored)) return e;
  }
  const Json* model = json_member(body, "model");
  if (!model || !model->is_string() || model->get_ref<const std::string&>().empty())
    return bad_request("model", "'model' is required and must be a non-empty string");
  r.model = model->get<std::string>();

  if (chat) {
    if (auto e = parse_messages(json_member(body, "messages"), "messages", limits, &r.messages, ignored)) return e;
    if (auto e = parse_tools(body, limits, ignored, &r)) return e;
    if (auto e = parse_response_format(json_member(body, "response_format"), ignored, &r.response_format)) return e;
    bool sharing = false;
    if (const Json* ks = json_member(body, "kv_sharing"); ks && !ks->is_null()) {
      if (auto e = get_bool(body, "kv_sharing", &sharing)) return e;
      r.kv_sharing = sharing;
    }
    if (auto e = get_number(body, "recompute", 0, 1, &r.recompute)) return e;
  } else {
    const Json* prompt = json_member(body, "prompt");
    if (!prompt) return bad_request("prompt", "'prompt' is required");
    const Json* p = prompt;
    if (p->is_array() && p->size() == 1 && (*p)[0].is_string()) p = &(*p)[0];
    if (p->is_string()) {
      r.prompt = p->get<std::string>();
      if (r.prompt.empty()) return bad_request("prompt", "'prompt' is empty");
      if (r.prompt.size() > limits.max_prompt_bytes)
        return bad_request("prompt", "'prompt' holds " + std::to_string(r.prompt.size()) + " bytes, over the limit of " +
                                 std::to_string(limits.max_prompt_bytes));
    } else if (p->is_array() && !p->empty() && (*p)[0].is_number()) {
      r.prompt_is_tokens = true;
      for (const Json& t : *p) {
        int64_t id = 0;
        if (!t.is_number() || read_int(t, "prompt", 0, std::numeric_limits<int32_t>::max(), &id))
          return bad_request("prompt", "'prompt' token ids must be non-negative integers");
        r.prompt_tokens.push_back(int32_t(id));
      }
    } else {
      return bad_request("prompt", "'prompt' must be a string, an array of one string, or an array of token ids");
    }
    if (auto e = get_bool(body, "echo", &r.echo)) return e;
    if (r.echo) return bad_request("echo", "'echo' is not supported by agentkv");
  }

  if (auto e = parse_sampling(body, limits, 0, &r)) return e;
  std::optional<int64_t> mct, n, lp_int, top;
  if (chat)
    if (auto e = get_int(body, "max_completion_tokens", 0, limits.max_tokens_limit, &mct)) return e;
  if (mct) r.max_tokens = int(*mct);
  if (auto e = get_int(body, "n", 1, limits.max_n, &n)) return e;
  if (n) r.n = int(*n);

  if (chat) {
    bool want = false;
    if (auto e = get_bool(body, "logprobs", &want)) return e;
    if (auto e = get_int(body, "top_logprobs", 0, 20, &top)) return e;
    if (top && !want) return bad_request("top_logprobs", "'top_logprobs' needs 'logprobs': true");
    if (want) r.logprobs = top ? int(*top) : 0;
  } else {
    if (auto e = get_int(body, "logprobs", 0, 5, &lp_int)) return e;  // OpenAI's legacy limit
    if (lp_int) r.logprobs = int(*lp_int);
  }
  if (auto e = get_bool(body, "stream", &r.stream)) return e;
  if (const Json* so = json_member(body, "stream_options"); so && !so->is_null()) {
    if (!so->is_object()) return bad_request("stream_options", "'stream_options' must be an object");
    for (const auto& [k, v] : so->items())
      if (k != "include_usage") return bad_request("stream_options." + k, "unknown field 'stream_options." + k + "'");
    if (auto e = get_bool(*so, "include_usage", &r.include_usage)) return e;
    if (!r.stream) return bad_request("stream_options", "'stream_options' needs 'stream': true");
  }
  for (const char* k : {"user", "service_tier", "prompt_cache_key", "safety_identifier", "verbosity", "reasoning_effort"})
    if (const Json* v = json_member(body, k); v && !v->is_null() && !v->is_string())
      return bad_request(k, std::string("'") + k + "' must be a string");
  if (const Json* v = json_member(body, "metadata"); v && !v->is_null() && !v->is_object())
    return bad_request("metadata", "'metadata' must be an object");
  bool store = false;
  if (auto e = get_bool(body, "store", &store)) return e;
  if (const Json* v = json_member(body, "modalities"); v && !v->is_null() && *v != Json::array({"text"}))
    return bad_request("modalities", "'modalities' other than [\"text\"] are not supported by agentkv");
  *out = std::move(r);
  return std::nullopt;
}

std::string error_json(const ApiError& e) {
  const Json param = e.param.empty() ? Json() : Json(e.param);
  return dump_json({{"error", {{"message", e.message}, {"type", e.type}, {"param", param}, {"code", nullptr}}}});
}

void to_json(Json& j, const UsageCounts& u) {
  j = {{"prompt_tokens", u.prompt_tokens},
       {"completion_tokens", u.completion_tokens},
       {"total_tokens", u.prompt_tokens + u.completion_tokens},
       {"prompt_tokens_details", {{"cached_tokens", u.cached_tokens}}}};
}

namespace {

// A token's text as its UTF-8 bytes (OpenAI's "bytes": the text may end inside a character).
Json bytes_of(const std::string& s) {
  Json a = Json::array();
  for (unsigned char c : s) a.push_back(int(c));
  return a;
}

// Chat logprobs: {"content": [{"token", "logprob", "bytes", "top_logprobs": [...]}]}.
Json chat_logprob_entry(const TokenLogprob& lp, const std::string& text, const std::vector<std::string>& tops) {
  Json top = Json::array();
  for (size_t i = 0; i < lp.top.size() && i < tops.size(); ++i)
    top.push_back({{"token", tops[i]}, {"logprob", lp.top[i].second}, {"bytes", bytes_of(tops[i])}});
  return {{"token", text}, {"logprob", lp.logprob}, {"bytes", bytes_of(text)}, {"top_logprobs", std::move(top)}};
}

// Legacy completions logprobs: parallel arrays.
Json completion_logprobs(const ChoiceOutput& c) {
  Json tokens = Json::array(), lps = Json::array(), tops = Json::array(), offsets = Json::array();
  size_t offset = 0;
  for (size_t i = 0; i < c.logprobs.size(); ++i) {
    const std::string& text = i < c.token_texts.size() ? c.token_texts[i] : std::string();
    tokens.push_back(text);
    lps.push_back(c.logprobs[i].logprob);
    Json top = Json::object();
    for (size_t k = 0; k < c.logprobs[i].top.size() && i < c.top_texts.size() && k < c.top_texts[i].size(); ++k)
      top[c.top_texts[i][k]] = c.logprobs[i].top[k].second;
    tops.push_back(std::move(top));
    offsets.push_back(offset);
    offset += text.size();
  }
  return {{"tokens", std::move(tokens)}, {"token_logprobs", std::move(lps)}, {"top_logprobs", std::move(tops)},
          {"text_offset", std::move(offsets)}};
}

// The fields every response and stream chunk starts with.
Json response_head(const CompletionRequest& req, const std::string& id, int64_t created, bool chunk) {
  const char* object = req.chat ? (chunk ? "chat.completion.chunk" : "chat.completion") : "text_completion";
  return {{"id", id}, {"object", object}, {"created", created}, {"model", req.model}};
}

// Chat logprobs of tokens [0, n): {"content": [entries]}.
Json chat_logprobs(const ChoiceOutput& c) {
  Json content = Json::array();
  for (size_t i = 0; i < c.logprobs.size(); ++i)
    content.push_back(chat_logprob_entry(c.logprobs[i], i < c.token_texts.size() ? c.token_texts[i] : "",
                                         i < c.top_texts.size() ? c.top_texts[i] : std::vector<std::string>{}));
  return {{"content", std::move(content)}};
}

}  // namespace

Json completion_response_json(const CompletionRequest& req, const std::string& id, int64_t created,
                              const std::vector<ChoiceOutput>& choices, const UsageCounts& usage) {
  Json j = response_head(req, id, created, false);
  Json arr = Json::array();
  for (const ChoiceOutput& c : choices) {
    Json ch = {{"index", c.index}};
    if (req.chat && !c.tool_calls.empty()) {
      Json calls = Json::array();
      for (const ChatToolCall& tc : c.tool_calls)
        calls.push_back({{"id", tc.id}, {"type", "function"}, {"function", {{"name", tc.name}, {"arguments", tc.arguments}}}});
      ch["message"] = {{"role", "assistant"}, {"content", nullptr}, {"tool_calls", std::move(calls)}};
      ch["logprobs"] = req.logprobs >= 0 ? chat_logprobs(c) : Json();
    } else if (req.chat) {
      ch["message"] = {{"role", "assistant"}, {"content", c.text}};
      ch["logprobs"] = req.logprobs >= 0 ? chat_logprobs(c) : Json();
    } else {
      ch["text"] = c.text;
      ch["logprobs"] = req.logprobs >= 0 ? completion_logprobs(c) : Json();
    }
    ch["finish_reason"] = c.finish_reason;
    arr.push_back(std::move(ch));
  }
  j["choices"] = std::move(arr);
  j["usage"] = usage;
  return j;
}

Json stream_chunk_json(const CompletionRequest& req, const std::string& id, int64_t created, int index,
                       const std::string& text, const std::string& finish_reason, bool first_of_choice,
                       const TokenLogprob* lp, const std::string* token_text,
                       const std::vector<std::string>* top_texts) {
  Json j = response_head(req, id, created, true);
  Json ch = {{"index", index}};
  ChoiceOutput one;  // this chunk's token, for the logprobs writers
  if (lp && token_text) {
    one.logprobs = {*lp};
    one.token_texts = {*token_text};
    if (top_texts) one.top_texts = {*top_texts};
  }
  if (req.chat) {
    Json delta = Json::object();
    if (first_of_choice) delta["role"] = "assistant";
    if (!text.empty() || finish_reason.empty()) delta["content"] = text;
    ch["delta"] = std::move(delta);
    ch["logprobs"] = lp && token_text ? chat_logprobs(one) : Json();
  } else {
    ch["text"] = text;
    ch["logprobs"] = lp && token_text ? completion_logprobs(one) : Json();
  }
  ch["finish_reason"] = finish_reason.empty() ? Json() : Json(finish_reason);
  j["choices"] = Json::array({std::move(ch)});
  return j;
}

Json stream_tool_call_chunk_json(const CompletionRequest& req, const std::string& id, int64_t created, int index,
                                 int call, const std::string* call_id, const std::string* name,
                                 const std::string& arguments, bool first_of_choice) {
  Json j = response_head(req, id, created, true);
  Json fn = Json::object();
  if (name) fn["name"] = *name;
  fn["arguments"] = arguments;
  Json tc = {{"index", call}};
  if (call_id) {
    tc["id"] = *call_id;
    tc["type"] = "function";
  }
  tc["function"] = std::move(fn);
  Json delta = Json::object();
  if (first_of_choice) {
    delta["role"] = "assistant";
    delta["content"] = nullptr;
  }
  delta["tool_calls"] = Json::array({std::move(tc)});
  j["choices"] = Json::array({{{"index", index}, {"delta", std::move(delta)}, {"logprobs", nullptr}, {"finish_reason", nullptr}}});
  return j;
}

Json stream_usage_chunk_json(const CompletionRequest& req, const std::string& id, int64_t created,
                             const UsageCounts& usage) {
  Json j = response_head(req, id, created, true);
  j["choices"] = Json::array();
  j["usage"] = usage;
  return j;
}

}  // namespace agentkv
