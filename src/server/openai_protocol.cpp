#include "server/openai_protocol.h"

#include <cmath>
#include <set>

namespace agentkv {

namespace {

ApiError bad(const std::string& param, const std::string& msg) { return ApiError{400, msg, param}; }

}  // namespace

std::optional<ApiError> get_number(const Json& body, const char* key, double lo, double hi, std::optional<double>* out) {
  const Json* v = body.get(key);
  if (!v || v->is_null()) return std::nullopt;
  if (!v->is_number()) return bad(key, std::string("'") + key + "' must be a number");
  const double d = v->as_number();
  if (!std::isfinite(d) || d < lo || d > hi)
    return bad(key, std::string("'") + key + "' must be in [" + Json::number(lo).dump() + ", " + Json::number(hi).dump() + "]");
  *out = d;
  return std::nullopt;
}

std::optional<ApiError> get_int(const Json& body, const char* key, double lo, double hi, std::optional<int64_t>* out) {
  std::optional<double> d;
  if (auto e = get_number(body, key, lo, hi, &d)) return e;
  if (!d) return std::nullopt;
  if (*d != std::floor(*d)) return bad(key, std::string("'") + key + "' must be an integer");
  *out = int64_t(*d);
  return std::nullopt;
}

std::optional<ApiError> get_bool(const Json& body, const char* key, bool* out) {
  const Json* v = body.get(key);
  if (!v || v->is_null()) return std::nullopt;
  if (!v->is_bool()) return bad(key, std::string("'") + key + "' must be true or false");
  *out = v->as_bool();
  return std::nullopt;
}

// The text of a message's content: a string, or an array of {"type": "text", "text": ...} parts.
std::optional<ApiError> content_text(const Json& c, const std::string& param, std::string* out) {
  if (c.is_string()) {
    *out = c.as_string();
    return std::nullopt;
  }
  if (c.is_array()) {
    out->clear();
    for (const Json& part : c.items()) {
      const Json* type = part.get("type");
      const Json* text = part.get("text");
      if (!part.is_object() || !type || !type->is_string() || type->as_string() != "text" || !text || !text->is_string())
        return bad(param, "'" + param + "' parts must be {\"type\": \"text\", \"text\": ...}; only text is supported");
      *out += text->as_string();
    }
    return std::nullopt;
  }
  return bad(param, "'" + param + "' must be a string or an array of text parts");
}

std::optional<ApiError> parse_messages(const Json* msgs, const std::string& param, const ApiLimits& limits,
                                       std::vector<ChatMessage>* out) {
  if (!msgs || !msgs->is_array() || msgs->items().empty())
    return bad(param, "'" + param + "' is required and must be a non-empty array");
  size_t bytes = 0;
  for (size_t i = 0; i < msgs->items().size(); ++i) {
    const Json& m = msgs->items()[i];
    const std::string p = param + "[" + std::to_string(i) + "]";
    if (!m.is_object()) return bad(p, "'" + p + "' must be an object");
    for (const auto& [k, v] : m.members())
      if (k != "role" && k != "content" && k != "name") return bad(p + "." + k, "unknown field '" + p + "." + k + "'");
    const Json* role = m.get("role");
    if (!role || !role->is_string()) return bad(p + ".role", "'" + p + ".role' is required");
    const std::string& rs = role->as_string();
    if (rs != "system" && rs != "user" && rs != "assistant" && rs != "developer")
      return bad(p + ".role", "'" + p + ".role' must be system, developer, user or assistant");
    const Json* content = m.get("content");
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
    out->push_back(stop->as_string());
  } else if (stop->is_array()) {
    for (const Json& s : stop->items()) {
      if (!s.is_string()) return bad("stop", "'stop' must be a string or an array of strings");
      out->push_back(s.as_string());
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

std::optional<ApiError> parse_completion_request(const Json& body, bool chat, const ApiLimits& limits,
                                                 CompletionRequest* out) {
  if (!body.is_object()) return bad("", "the request body must be a JSON object");
  CompletionRequest r;
  r.chat = chat;
  static const std::set<std::string> kCommon = {"model", "max_tokens", "temperature", "top_p", "n", "seed",
                                                "stop", "stream", "stream_options", "user", "logprobs",
                                                "presence_penalty", "frequency_penalty"};
  static const std::set<std::string> kChat = {"messages", "top_logprobs", "max_completion_tokens"};
  static const std::set<std::string> kCompletion = {"prompt", "echo"};
  static const std::set<std::string> kUnsupported = {"tools", "tool_choice", "functions", "function_call",
                                                     "response_format", "logit_bias", "best_of", "suffix"};
  for (const auto& [key, value] : body.members()) {
    if (kCommon.count(key) || (chat ? kChat : kCompletion).count(key)) continue;
    if (kUnsupported.count(key)) return bad(key, "'" + key + "' is not supported by agentkv");
    return bad(key, "unknown field '" + key + "'");
  }
  const Json* model = body.get("model");
  if (!model || !model->is_string() || model->as_string().empty())
    return bad("model", "'model' is required and must be a non-empty string");
  r.model = model->as_string();

  if (chat) {
    if (auto e = parse_messages(body.get("messages"), "messages", limits, &r.messages)) return e;
  } else {
    const Json* prompt = body.get("prompt");
    if (!prompt) return bad("prompt", "'prompt' is required");
    const Json* p = prompt;
    if (p->is_array() && p->items().size() == 1 && p->items()[0].is_string()) p = &p->items()[0];
    if (p->is_string()) {
      r.prompt = p->as_string();
      if (r.prompt.empty()) return bad("prompt", "'prompt' is empty");
      if (r.prompt.size() > limits.max_prompt_bytes)
        return bad("prompt", "'prompt' holds " + std::to_string(r.prompt.size()) + " bytes, over the limit of " +
                                 std::to_string(limits.max_prompt_bytes));
    } else if (p->is_array() && !p->items().empty() && p->items()[0].is_number()) {
      r.prompt_is_tokens = true;
      for (const Json& t : p->items()) {
        if (!t.is_number() || t.as_number() != std::floor(t.as_number()) || t.as_number() < 0 || t.as_number() > 2e9)
          return bad("prompt", "'prompt' token ids must be non-negative integers");
        r.prompt_tokens.push_back(int32_t(t.as_number()));
      }
    } else {
      return bad("prompt", "'prompt' must be a string, an array of one string, or an array of token ids");
    }
    if (auto e = get_bool(body, "echo", &r.echo)) return e;
    if (r.echo) return bad("echo", "'echo' is not supported by agentkv");
  }

  std::optional<int64_t> mt, mct, n, seed, lp_int, top;
  if (auto e = get_int(body, "max_tokens", 0, limits.max_tokens_limit, &mt)) return e;
  if (chat)
    if (auto e = get_int(body, "max_completion_tokens", 0, limits.max_tokens_limit, &mct)) return e;
  if (mct) mt = mct;
  if (mt) r.max_tokens = int(*mt);
  std::optional<double> temp, top_p, pres, freq;
  if (auto e = get_number(body, "temperature", 0, 2, &temp)) return e;
  if (auto e = get_number(body, "top_p", 0, 1, &top_p)) return e;
  if (temp) r.temperature = float(*temp);
  if (top_p) {
    if (*top_p <= 0) return bad("top_p", "'top_p' must be in (0, 1]");
    r.top_p = float(*top_p);
  }
  if (auto e = get_number(body, "presence_penalty", -2, 2, &pres)) return e;
  if (auto e = get_number(body, "frequency_penalty", -2, 2, &freq)) return e;
  if ((pres && *pres != 0) || (freq && *freq != 0))
    return bad(pres && *pres != 0 ? "presence_penalty" : "frequency_penalty",
               "presence_penalty and frequency_penalty are not supported by agentkv (use 0)");
  if (auto e = get_int(body, "n", 1, limits.max_n, &n)) return e;
  if (n) r.n = int(*n);
  if (auto e = get_int(body, "seed", -9.2e18, 9.2e18, &seed)) return e;
  if (seed) r.seed = uint64_t(*seed);

  if (auto e = parse_stop(body.get("stop"), limits, &r.stop)) return e;

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
  if (const Json* so = body.get("stream_options"); so && !so->is_null()) {
    if (!so->is_object()) return bad("stream_options", "'stream_options' must be an object");
    for (const auto& [k, v] : so->members())
      if (k != "include_usage") return bad("stream_options." + k, "unknown field 'stream_options." + k + "'");
    if (auto e = get_bool(*so, "include_usage", &r.include_usage)) return e;
    if (!r.stream) return bad("stream_options", "'stream_options' needs 'stream': true");
  }
  if (const Json* user = body.get("user"); user && !user->is_null() && !user->is_string())
    return bad("user", "'user' must be a string");
  *out = std::move(r);
  return std::nullopt;
}

std::string error_json(const ApiError& e) {
  Json err = Json::object();
  err.set("message", Json::string(e.message));
  err.set("type", Json::string(e.type));
  err.set("param", e.param.empty() ? Json::null() : Json::string(e.param));
  err.set("code", Json::null());
  Json j = Json::object();
  j.set("error", std::move(err));
  return j.dump();
}

Json usage_json(const UsageCounts& u) {
  Json j = Json::object();
  j.set("prompt_tokens", Json::number(u.prompt_tokens));
  j.set("completion_tokens", Json::number(u.completion_tokens));
  j.set("total_tokens", Json::number(u.prompt_tokens + u.completion_tokens));
  Json details = Json::object();
  details.set("cached_tokens", Json::number(u.cached_tokens));
  j.set("prompt_tokens_details", std::move(details));
  return j;
}

namespace {

Json bytes_of(const std::string& s) {
  Json a = Json::array();
  for (unsigned char c : s) a.push(Json::number(c));
  return a;
}

// Chat logprobs: {"content": [{"token", "logprob", "bytes", "top_logprobs": [...]}]}.
Json chat_logprob_entry(const TokenLogprob& lp, const std::string& text, const std::vector<std::string>& tops) {
  Json e = Json::object();
  e.set("token", Json::string(text));
  e.set("logprob", Json::number(lp.logprob));
  e.set("bytes", bytes_of(text));
  Json top = Json::array();
  for (size_t i = 0; i < lp.top.size() && i < tops.size(); ++i) {
    Json t = Json::object();
    t.set("token", Json::string(tops[i]));
    t.set("logprob", Json::number(lp.top[i].second));
    t.set("bytes", bytes_of(tops[i]));
    top.push(std::move(t));
  }
  e.set("top_logprobs", std::move(top));
  return e;
}

// Legacy completions logprobs: parallel arrays.
Json completion_logprobs(const ChoiceOutput& c) {
  Json tokens = Json::array(), lps = Json::array(), tops = Json::array(), offsets = Json::array();
  size_t offset = 0;
  for (size_t i = 0; i < c.logprobs.size(); ++i) {
    const std::string& text = i < c.token_texts.size() ? c.token_texts[i] : std::string();
    tokens.push(Json::string(text));
    lps.push(Json::number(c.logprobs[i].logprob));
    Json top = Json::object();
    for (size_t k = 0; k < c.logprobs[i].top.size() && i < c.top_texts.size() && k < c.top_texts[i].size(); ++k)
      top.set(c.top_texts[i][k], Json::number(c.logprobs[i].top[k].second));
    tops.push(std::move(top));
    offsets.push(Json::number(double(offset)));
    offset += text.size();
  }
  Json j = Json::object();
  j.set("tokens", std::move(tokens));
  j.set("token_logprobs", std::move(lps));
  j.set("top_logprobs", std::move(tops));
  j.set("text_offset", std::move(offsets));
  return j;
}

// The fields every stream chunk starts with.
Json chunk_head(const CompletionRequest& req, const std::string& id, int64_t created) {
  Json j = Json::object();
  j.set("id", Json::string(id));
  j.set("object", Json::string(req.chat ? "chat.completion.chunk" : "text_completion"));
  j.set("created", Json::number(double(created)));
  j.set("model", Json::string(req.model));
  return j;
}

}  // namespace

Json completion_response_json(const CompletionRequest& req, const std::string& id, int64_t created,
                              const std::vector<ChoiceOutput>& choices, const UsageCounts& usage) {
  Json j = Json::object();
  j.set("id", Json::string(id));
  j.set("object", Json::string(req.chat ? "chat.completion" : "text_completion"));
  j.set("created", Json::number(double(created)));
  j.set("model", Json::string(req.model));
  Json arr = Json::array();
  for (const ChoiceOutput& c : choices) {
    Json ch = Json::object();
    ch.set("index", Json::number(c.index));
    if (req.chat) {
      Json msg = Json::object();
      msg.set("role", Json::string("assistant"));
      msg.set("content", Json::string(c.text));
      ch.set("message", std::move(msg));
      if (req.logprobs >= 0) {
        Json content = Json::array();
        for (size_t i = 0; i < c.logprobs.size(); ++i)
          content.push(chat_logprob_entry(c.logprobs[i], i < c.token_texts.size() ? c.token_texts[i] : "",
                                          i < c.top_texts.size() ? c.top_texts[i] : std::vector<std::string>{}));
        Json lp = Json::object();
        lp.set("content", std::move(content));
        ch.set("logprobs", std::move(lp));
      } else {
        ch.set("logprobs", Json::null());
      }
    } else {
      ch.set("text", Json::string(c.text));
      ch.set("logprobs", req.logprobs >= 0 ? completion_logprobs(c) : Json::null());
    }
    ch.set("finish_reason", Json::string(c.finish_reason));
    arr.push(std::move(ch));
  }
  j.set("choices", std::move(arr));
  j.set("usage", usage_json(usage));
  return j;
}

Json stream_chunk_json(const CompletionRequest& req, const std::string& id, int64_t created, int index,
                       const std::string& text, const std::string& finish_reason, bool first_of_choice,
                       const TokenLogprob* lp, const std::string* token_text,
                       const std::vector<std::string>* top_texts) {
  Json j = chunk_head(req, id, created);
  Json ch = Json::object();
  ch.set("index", Json::number(index));
  if (req.chat) {
    Json delta = Json::object();
    if (first_of_choice) delta.set("role", Json::string("assistant"));
    if (!text.empty() || finish_reason.empty()) delta.set("content", Json::string(text));
    ch.set("delta", std::move(delta));
    if (lp && token_text) {
      Json content = Json::array();
      content.push(chat_logprob_entry(*lp, *token_text, top_texts ? *top_texts : std::vector<std::string>{}));
      Json l = Json::object();
      l.set("content", std::move(content));
      ch.set("logprobs", std::move(l));
    } else {
      ch.set("logprobs", Json::null());
    }
  } else {
    ch.set("text", Json::string(text));
    if (lp && token_text) {
      ChoiceOutput one;
      one.logprobs = {*lp};
      one.token_texts = {*token_text};
      if (top_texts) one.top_texts = {*top_texts};
      ch.set("logprobs", completion_logprobs(one));
    } else {
      ch.set("logprobs", Json::null());
    }
  }
  ch.set("finish_reason", finish_reason.empty() ? Json::null() : Json::string(finish_reason));
  Json arr = Json::array();
  arr.push(std::move(ch));
  j.set("choices", std::move(arr));
  return j;
}

Json stream_usage_chunk_json(const CompletionRequest& req, const std::string& id, int64_t created,
                             const UsageCounts& usage) {
  Json j = chunk_head(req, id, created);
  j.set("choices", Json::array());
  j.set("usage", usage_json(usage));
  return j;
}

}  // namespace agentkv
