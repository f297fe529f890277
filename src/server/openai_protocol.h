// The OpenAI request and response shapes for /v1/completions and /v1/chat/completions: validation of
// untrusted JSON bodies into engine parameters (every error names the field), and the JSON of
// responses and stream chunks. No sockets and no engine here, so it is tested directly.
// What frameworks send is read as OpenAI defines it: tools, tool_choice and response_format are
// parsed here (decoding them is the route's and the engine's); a field that would change the output
// and is not implemented is a 400 naming it; a field agentkv does not know is ignored and reported
// (CompletionRequest::ignored_fields), or refused under serve --strict-api.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "engine/request.h"
#include "tokenizer/chat_template.h"
#include "util/json.h"
#include "util/status.h"

namespace agentkv {

struct ApiLimits {
  int max_tokens_limit = 4096;     // the most a request may ask for
  int max_n = 16;
  int max_stop = 4;                // OpenAI allows up to 4 stop sequences
  size_t max_prompt_bytes = 1 << 20;
  size_t max_tools = 128;          // OpenAI's limit on "tools"
  size_t max_logit_bias = 1024;    // entries of "logit_bias"
  // serve --strict-api: a request field agentkv does not know is a 400 ("unknown field 'x'") instead of
  // being ignored and reported in CompletionRequest::ignored_fields.
  bool strict_api = false;
};

// The sampling fields of every generating endpoint (completions, chat, agents' respond, rounds), with
// OpenAI's names and ranges; parse_sampling is their one reader.
struct SamplingFields {
  std::optional<int> max_tokens;       // absent: the endpoint's default (completions 16, else up to the context)
  float temperature = 1.0f;            // OpenAI's default
  float top_p = 1.0f;
  std::optional<uint64_t> seed;
  std::vector<std::string> stop;
  float presence_penalty = 0.0f;       // [-2, 2]
  float frequency_penalty = 0.0f;      // [-2, 2]
  std::vector<std::pair<int32_t, float>> logit_bias;  // sorted by token id; ids checked by Engine::validate
};

// One entry of "tools" (chat): a function the model may call.
struct ToolSpec {
  std::string name;         // [a-zA-Z0-9_-]{1,64}, unique within the request
  std::string description;
  Json parameters;          // its arguments' JSON Schema as sent; null when absent
  bool strict = false;
};

// "tool_choice": kNone (no call), kAuto (text or a call), kRequired (a call), kFunction (a call of
// CompletionRequest::tool_choice_name).
enum class ToolChoice { kNone, kAuto, kRequired, kFunction };

// "response_format": text (the default), any JSON object, or a value of a JSON Schema.
struct ResponseFormat {
  enum class Kind { kText, kJsonObject, kJsonSchema };
  Kind kind = Kind::kText;
  std::string name, description;  // kJsonSchema: json_schema.name (required), json_schema.description
  Json schema;                    // kJsonSchema: json_schema.schema as sent (an object); null when absent
  bool strict = false;            // kJsonSchema: json_schema.strict
};

struct CompletionRequest : SamplingFields {
  bool chat = false;
  std::string model;
  std::vector<ChatMessage> messages;   // chat
  std::string prompt;                  // completions, as text
  std::vector<int32_t> prompt_tokens;  // completions, when the prompt is given as token ids
  bool prompt_is_tokens = false;
  int n = 1;
  int logprobs = -1;                   // -1 off; else top_logprobs count (0 = chosen token only)
  bool stream = false;
  bool include_usage = false;          // stream_options.include_usage
  bool echo = false;
  // Chat only: collective KV sharing of the request's messages (engine/chat_sharing.h); unset: the
  // server's default for the model. recompute in [0, 1]; unset: the server's --recompute.
  std::optional<bool> kv_sharing;
  std::optional<double> recompute;
  // Chat only: the tools and how they may be called (OpenAI's default: kAuto with tools, else kNone).
  std::vector<ToolSpec> tools;
  ToolChoice tool_choice = ToolChoice::kNone;
  std::string tool_choice_name;        // kFunction: one of tools
  bool parallel_tool_calls = true;
  ResponseFormat response_format;      // chat only
  // Fields agentkv does not know and ignored (not under strict_api), each named once: top-level ones by
  // key, nested ones by path with indices written [] ("messages[].x"). The route logs them.
  std::vector<std::string> ignored_fields;
};

// 400-class problems: status and message (the OpenAI error object's "message" and "param").
struct ApiError {
  int status = 400;
  std::string message;
  std::string param;
  std::string type = "invalid_request_error";
  int retry_after_s = 0;  // > 0: sent as Retry-After (waiting can help)
};
// A 400 naming the field (param) and the problem.
inline ApiError bad_request(const std::string& param, const std::string& msg) { return ApiError{400, msg, param}; }

// Strict readers of one field of a request object, shared by the OpenAI and agents endpoints. An
// absent or null field leaves *out as it is; anything else must have the right type and range, or
// the error names the field.
std::optional<ApiError> get_number(const Json& body, const char* key, double lo, double hi, std::optional<double>* out);
// An integer, exact over all of int64 (an integer-valued float such as 2.0 is read too).
std::optional<ApiError> get_int(const Json& body, const char* key, int64_t lo, int64_t hi, std::optional<int64_t>* out);
// A seed: any integer in [-2^63, 2^64 - 1], exactly; a negative one is read modulo 2^64.
std::optional<ApiError> get_seed(const Json& body, const char* key, std::optional<uint64_t>* out);
std::optional<ApiError> get_bool(const Json& body, const char* key, bool* out);
// A field agentkv does not know, at `path` ("x", "messages[2].x"): a 400 "unknown field" when ignored is
// null (strict), else recorded once in *ignored with indices written [] (CompletionRequest::ignored_fields).
std::optional<ApiError> unknown_field(const std::string& path, std::vector<std::string>* ignored);
// unknown_field for each member of object obj (at `path`, "" for the top level) not in `known`.
std::optional<ApiError> check_members(const Json& obj, const std::string& path, std::initializer_list<const char*> known,
                                      std::vector<std::string>* ignored);
// OpenAI's rule for function and schema names: [a-zA-Z0-9_-]{1,64}.
bool valid_function_name(const std::string& name);
// A speaker's name: an agent's "name" and a chat message's "name". Names are written into shared
// text (a round's all-gather block is one "name: answer" line per agent), so a name is 1 to 64 ASCII
// letters, digits, '_', '-', '.' and spaces, neither starting nor ending with a space: no newline,
// control character, ':' or markup that could forge another speaker's line. The 400 names `param`.
std::optional<ApiError> check_speaker_name(const std::string& name, const std::string& param);
// A response id as OpenAI writes them, never repeated or wrapped: prefix + "-" + 24 random base62
// characters ("chatcmpl-…", "cmpl-…").
std::string new_response_id(std::string_view prefix);
// A message's content: a string or an array of {"type": "text", "text": ...} parts, concatenated.
// Image, audio and file parts are a 400 naming the part.
std::optional<ApiError> content_text(const Json& c, const std::string& param, std::string* out);
// A non-empty array of messages; appends to *out. Roles system, developer (read as system), user,
// assistant (content may be null or absent when it has tool_calls; refusal is accepted) and tool (needs
// tool_call_id and content); name on any. audio and function_call are 400s. Unknown members of a
// message: see check_members.
std::optional<ApiError> parse_messages(const Json* msgs, const std::string& param, const ApiLimits& limits,
                                       std::vector<ChatMessage>* out, std::vector<std::string>* ignored = nullptr);
// "stop": a string or an array of at most limits.max_stop non-empty strings; appends to *out.
std::optional<ApiError> parse_stop(const Json* stop, const ApiLimits& limits, std::vector<std::string>* out);

// The one reader of the sampling fields: max_tokens in [min_max_tokens, limits.max_tokens_limit],
// temperature in [0, 2], top_p in (0, 1], seed (get_seed), stop (parse_stop), presence_penalty and
// frequency_penalty in [-2, 2], logit_bias (an object of at most limits.max_logit_bias token-id strings
// to numbers in [-100, 100]). The caller checks for unknown fields.
std::optional<ApiError> parse_sampling(const Json& body, const ApiLimits& limits, int min_max_tokens, SamplingFields* out);
// The fields into the engine's parameters (not max_tokens: see fit_turn); an absent seed is drawn at random.
void apply_sampling(const SamplingFields& s, RequestParams* p);

// Parses a request body. Fields OpenAI defines that would change the output and agentkv does not
// implement (functions, audio, prediction, ...) are errors that say so, as are the other endpoint's
// fields (tools on /v1/completions); unknown fields are ignored and reported, or refused under
// limits.strict_api. A null field is an absent one.
std::optional<ApiError> parse_completion_request(const Json& body, bool chat, const ApiLimits& limits,
                                                 CompletionRequest* out);
// "tools", "tool_choice" and "parallel_tool_calls" of a chat request into *out (ignored: as check_members).
std::optional<ApiError> parse_tools(const Json& body, const ApiLimits& limits, std::vector<std::string>* ignored,
                                    CompletionRequest* out);
// "response_format" of a chat request.
std::optional<ApiError> parse_response_format(const Json* rf, std::vector<std::string>* ignored, ResponseFormat* out);
// Writes "agentkv: ignoring request field 'x' (first use)" to stderr for each field this process has
// not logged before (thread-safe; the set of names remembered is bounded).
void log_ignored_fields_once(const std::vector<std::string>& fields);

// The error object every 4xx / 5xx carries: {"error": {"message", "type", "param", "code"}}.
std::string error_json(const ApiError& e);

struct ChoiceOutput {
  int index = 0;
  std::string text;
  std::string finish_reason;               // "stop", "length"
  std::vector<TokenLogprob> logprobs;      // when requested
  std::vector<std::string> token_texts;    // text of each generated token (for logprobs)
  std::vector<std::vector<std::string>> top_texts;  // text of each top token
  std::vector<ChatToolCall> tool_calls;    // chat: the answer's calls (then content is null)
};

struct UsageCounts {
  int prompt_tokens = 0;
  int completion_tokens = 0;
  int cached_tokens = 0;
};

// {prompt_tokens, completion_tokens, total_tokens, prompt_tokens_details: {cached_tokens}}.
void to_json(Json& j, const UsageCounts& u);
Json completion_response_json(const CompletionRequest& req, const std::string& id, int64_t created,
                              const std::vector<ChoiceOutput>& choices, const UsageCounts& usage);
// One streamed chunk with one choice's new text (chat: a delta; the first chunk of a choice also
// carries the role). finish_reason empty: not finished.
Json stream_chunk_json(const CompletionRequest& req, const std::string& id, int64_t created, int index,
                       const std::string& text, const std::string& finish_reason, bool first_of_choice,
                       const TokenLogprob* lp, const std::string* token_text,
                       const std::vector<std::string>* top_texts);
// A streamed chunk of one tool call (OpenAI's delta.tool_calls[0]): its start carries the id, type
// and name (call_id and name non-null) with empty arguments; later chunks carry more arguments.
Json stream_tool_call_chunk_json(const CompletionRequest& req, const std::string& id, int64_t created, int index,
                                 int call, const std::string* call_id, const std::string* name,
                                 const std::string& arguments, bool first_of_choice);
// The final usage-only chunk of a stream (stream_options.include_usage).
Json stream_usage_chunk_json(const CompletionRequest& req, const std::string& id, int64_t created,
                             const UsageCounts& usage);

}  // namespace agentkv
