// The OpenAI protocol (server/openai_protocol.h): field readers, the one sampling-field parser, the
// completion request parser and the response / stream-chunk JSON.
#include "server/openai_protocol.h"

#include <cmath>
#include <limits>
#include <random>
#include <set>

namespace agentkv {

namespace {

ApiError bad(const std::string& param, const std::string& msg) { return ApiError{400, msg, param}; }

}  // namespace

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
    if (u > uint64_t(std::numeric_limits<int64_t>::max()) || int64_t(u) > hi || int64_t(u) < lo) return bad(key, range);
    *out = int64_t(u);
    return std::nullopt;
  }
  if (v.is_number_integer()) {
    const int64_t i = v.get<int64_t>();
    if (i < lo || i > hi) return bad(key, range);
    *out = i;
    return std::nullopt;
  }
  const double d = v.get<double>();
  if (!std::isfinite(d) || d < double(lo) || d > double(hi)) return bad(key, range);
  if (d != std::floor(d)) return bad(key, std::string("'") + key + "' must be an integer");
  *out = int64_t(d);
  return std::nullopt;
}

}  // namespace

std::optional<ApiError> get_number(const Json& body, const char* key, double lo, double hi, std::optional<double>* out) {
  const Json* v = json_member(body, key);
  if (!v || v->is_null()) return std::nullopt;
  if (!v->is_number()) return bad(key, std::string("'") + key + "' must be a number");
  const double d = v->get<double>();
  if (!std::isfinite(d) || d < lo || d > hi) return bad(key, range_message(key, bound_text(lo), bound_text(hi)));
  *out = d;
  return std::nullopt;
}

std::optional<ApiError> get_int(const Json& body, const char* key, int64_t lo, int64_t hi, std::optional<int64_t>* out) {
  const Json* v = json_member(body, key);
  if (!v || v->is_null()) return std::nullopt;
  if (!v->is_number()) return bad(key, std::string("'") + key + "' must be a number");
  int64_t i = 0;
  if (auto e = read_int(*v, key, lo, hi, &i)) return e;
  *out = i;
  return std::nullopt;
}

std::optional<ApiError> get_seed(const Json& body, const char* key, std::optional<uint64_t>* out) {
  const Json* v = json_member(body, key);
  if (!v || v->is_null()) return std::nullopt;
  if (!v->is_number()) return bad(key, std::string("'") + key + "' must be a number");
  if (v->is_number_unsigned()) {
    *out = v->get<uint64_t>();
    return std::nullopt;
  }
  int64_t i = 0;
  if (read_int(*v, key, std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max(), &i))
    return bad(key, range_message(key, std::to_string(std::numeric_limits<int64_t>::min()),
                                  std::to_string(std::numeric_limits<uint64_t>::max())));
  *out = uint64_t(i);
  return std::nullopt;
}

std::optional<ApiError> get_bool(const Json& body, const char* key, bool* out) {
  const Json* v = json_member(body, key);
  if (!v || v->is_null()) return std::nullopt;
  if (!v->is_boolean()) return bad(key, std::string("'") + key + "' must be true or false");
  *out = v->get<bool>();
  return std::nullopt;
}

// The text of a message's content: a string, or an array of {"type": "text", "text": ...} parts.
std::optional<ApiError> content_text(const Json& c, const std::string& param, std::string* out) {
  if (c.is_string()) {
    *out = c.get<std::string>();
    return std::nullopt;
  }
  if (c.is_array()) {
    out->clear();
    for (const Json& part : c) {
      const Json* type = json_member(part, "type");
      const Json* text = json_member(part, "text");
      if (!type || !text || *type != "text" || !text->is_string())
        return bad(param, "'" + param + "' parts must be {\"type\": \"text\", \"text\": ...}; only text is supported");
      *out += text->get_ref<const std::string&>();
    }
    return std::nullopt;
  }
  return bad(param, "'" + param + "' must be a string or an array of text parts");
}

std::optional<ApiError> parse_messages(const Json* msgs, const std::string& param, const ApiLimits& limits,
                                       std::vector<ChatMessage>* out) {
  if (!msgs || !msgs->is_array() || msgs->empty())
    return bad(param, "'" + param + "' is required and must be a non-empty array");
  size_t bytes = 0;
  for (size_t i = 0; i < msgs->size(); ++i) {
    const Json& m = (*msgs)[i];
    const std::string p = param + "[" + std::to_string(i) + "]";
    if (!m.is_object()) return bad(p, "'" + p + "' must be an object");
    for (const auto& [k, v] : m.items())
      if (k != "role" && k != "content" && k != "name") return bad(p + "." + k, "unknown field '" + p + "." + k + "'");
    const Json* role = json_member(m, "role");
    if (!role || !role->is_string()) return bad(p + ".role", "'" + p + ".role' is required");
    const std::string& rs = role->get_ref<const std::string&>();
    if (rs != "system" && rs != "user" && rs != "assistant" && rs != "developer")
      return bad(p + ".role", "'" + p + ".role' must be system, developer, user or assistant");
    const Json* content = json_member(m, "content");
    if (!content) return bad(p + ".content", "'" + p + ".content' is required");
    ChatMessage cm;
    cm.role = rs == "developer" ? "system" : rs;
    if (auto e = content_text(*content, p + ".content", &cm.content)) return e;
    bytes += cm.content.size();
    out->push_back(std::move(cm));
  }
  if (bytes > limits.max_prompt_bytes)
    return bad(param, "the messages hold " + std::to_string(bytes) + " bytes, over the limit of " +
                          std::to_string(limits.max_prompt_bytes));
  return std::nullopt;
}

std::optional<ApiError> parse_stop(const Json* stop, const ApiLimits& limits, std::vector<std::string>* out) {
  if (!stop || stop->is_null()) return std::nullopt;
  if (stop->is_string()) {
    out->push_back(stop->get<std::string>());
  } else if (stop->is_array()) {
    for (const Json& s : *stop) {
      if (!s.is_string()) return bad("stop", "'stop' must be a string or an array of strings");
      out->push_back(s.get<std::string>());
    }
  } else {
    return bad("stop", "'stop' must be a string or an array of strings");
  }
  if (int(out->size()) > limits.max_stop)
    return bad("stop", "'stop' holds more than " + std::to_string(limits.max_stop) + " strings");
  for (auto& s : *out)
    if (s.empty()) return bad("stop", "'stop' strings must not be empty");
  return std::nullopt;
}

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
    if (*top_p <= 0) return bad("top_p", "'top_p' must be in (0, 1]");
    f.top_p = float(*top_p);
  }
  if (auto e = get_seed(body, "seed", &f.seed)) return e;
  if (auto e = parse_stop(json_member(body, "stop"), limits, &f.stop)) return e;
  *out = std::move(f);
  return std::nullopt;
}

void apply_sampling(const SamplingFields& s, RequestParams* p) {
  p->sampling.temperature = s.temperature;
  p->sampling.top_p = s.top_p;
  p->sampling.seed = s.seed ? *s.seed : std::random_device{}();
  p->stop = s.stop;
}

std::optional<ApiError> parse_completion_request(const Json& body, bool chat, const ApiLimits& limits,
                                                 CompletionRequest* out) {
  if (!body.is_object()) return bad("", "the request body must be a JSON object");
  CompletionRequest r;
  r.chat = chat;
  static const std::set<std::string> kCommon = {"model", "max_tokens", "temperature", "top_p", "n", "seed",
                                                "stop", "stream", "stream_options", "user", "logprobs",
                                                "presence_penalty", "frequency_penalty"};
  static const std::set<std::string> kChat = {"messages", "top_logprobs", "max_completion_tokens", "kv_sharing",
                                              "recompute"};
  static const std::set<std::string> kCompletion = {"prompt", "echo"};
  static const std::set<std::string> kUnsupported = {"tools", "tool_choice", "functions", "function_call",
                                                     "response_format", "logit_bias", "best_of", "suffix"};
  for (const auto& [key, value] : body.items()) {
    if (kCommon.count(key) || (chat ? kChat : kCompletion).count(key)) continue;
    if (kUnsupported.count(key)) return bad(key, "'" + key + "' is not supported by agentkv");
    return bad(key, "unknown field '" + key + "'");
  }
  const Json* model = json_member(body, "model");
  if (!model || !model->is_string() || model->get_ref<const std::string&>().empty())
    return bad("model", "'model' is required and must be a non-empty string");
  r.model = model->get<std::string>();

  if (chat) {
    if (auto e = parse_messages(json_member(body, "messages"), "messages", limits, &r.messages)) return e;
    bool sharing = false;
    if (const Json* ks = json_member(body, "kv_sharing"); ks && !ks->is_null()) {
      if (auto e = get_bool(body, "kv_sharing", &sharing)) return e;
      r.kv_sharing = sharing;
    }
    if (auto e = get_number(body, "recompute", 0, 1, &r.recompute)) return e;
  } else {
    const Json* prompt = json_member(body, "prompt");
    if (!prompt) return bad("prompt", "'prompt' is required");
    const Json* p = prompt;
    if (p->is_array() && p->size() == 1 && (*p)[0].is_string()) p = &(*p)[0];
    if (p->is_string()) {
      r.prompt = p->get<std::string>();
      if (r.prompt.empty()) return bad("prompt", "'prompt' is empty");
      if (r.prompt.size() > limits.max_prompt_bytes)
        return bad("prompt", "'prompt' holds " + std::to_string(r.prompt.size()) + " bytes, over the limit of " +
                                 std::to_string(limits.max_prompt_bytes));
    } else if (p->is_array() && !p->empty() && (*p)[0].is_number()) {
      r.prompt_is_tokens = true;
      for (const Json& t : *p) {
        int64_t id = 0;
        if (!t.is_number() || read_int(t, "prompt", 0, std::numeric_limits<int32_t>::max(), &id))
          return bad("prompt", "'prompt' token ids must be non-negative integers");
        r.prompt_tokens.push_back(int32_t(id));
      }
    } else {
      return bad("prompt", "'prompt' must be a string, an array of one string, or an array of token ids");
    }
    if (auto e = get_bool(body, "echo", &r.echo)) return e;
    if (r.echo) return bad("echo", "'echo' is not supported by agentkv");
  }

  if (auto e = parse_sampling(body, limits, 0, &r)) return e;
  std::optional<int64_t> mct, n, lp_int, top;
  if (chat)
    if (auto e = get_int(body, "max_completion_tokens", 0, limits.max_tokens_limit, &mct)) return e;
  if (mct) r.max_tokens = int(*mct);
  std::optional<double> pres, freq;
  if (auto e = get_number(body, "presence_penalty", -2, 2, &pres)) return e;
  if (auto e = get_number(body, "frequency_penalty", -2, 2, &freq)) return e;
  if ((pres && *pres != 0) || (freq && *freq != 0))
    return bad(pres && *pres != 0 ? "presence_penalty" : "frequency_penalty",
               "presence_penalty and frequency_penalty are not supported by agentkv (use 0)");
  if (auto e = get_int(body, "n", 1, limits.max_n, &n)) return e;
  if (n) r.n = int(*n);

  if (chat) {
    bool want = false;
    if (auto e = get_bool(body, "logprobs", &want)) return e;
    if (auto e = get_int(body, "top_logprobs", 0, 20, &top)) return e;
    if (top && !want) return bad("top_logprobs", "'top_logprobs' needs 'logprobs': true");
    if (want) r.logprobs = top ? int(*top) : 0;
  } else {
    if (auto e = get_int(body, "logprobs", 0, 5, &lp_int)) return e;  // OpenAI's legacy limit
    if (lp_int) r.logprobs = int(*lp_int);
  }
  if (auto e = get_bool(body, "stream", &r.stream)) return e;
  if (const Json* so = json_member(body, "stream_options"); so && !so->is_null()) {
    if (!so->is_object()) return bad("stream_options", "'stream_options' must be an object");
    for (const auto& [k, v] : so->items())
      if (k != "include_usage") return bad("stream_options." + k, "unknown field 'stream_options." + k + "'");
    if (auto e = get_bool(*so, "include_usage", &r.include_usage)) return e;
    if (!r.stream) return bad("stream_options", "'stream_options' needs 'stream': true");
  }
  if (const Json* user = json_member(body, "user"); user && !user->is_null() && !user->is_string())
    return bad("user", "'user' must be a string");
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
    if (req.chat) {
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

Json stream_usage_chunk_json(const CompletionRequest& req, const std::string& id, int64_t created,
                             const UsageCounts& usage) {
  Json j = response_head(req, id, created, true);
  j["choices"] = Json::array();
  j["usage"] = usage;
  return j;
}

}  // namespace agentkv
