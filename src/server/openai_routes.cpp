// The OpenAI routes: POST /v1/completions and /v1/chat/completions (streamed or not, n choices,
// logprobs) and GET /v1/models. A completion is one engine request whose events come back through
// its mailbox; a client that goes away has its request cancelled.
#include <algorithm>
#include <atomic>
#include <functional>

#include "engine/chat_sharing.h"
#include "engine/request_outcome.h"
#include "server/error_status.h"
#include "server/mailbox.h"
#include "server/routes.h"
#include "server/structured_output.h"
#include "server/tool_call_stream.h"
#include "server/turn_builder.h"
#include "share/turn_pieces.h"
#include "tokenizer/chat_template.h"

namespace agentkv {

namespace {

std::string request_id(bool chat) { return new_response_id(chat ? "chatcmpl" : "cmpl"); }

std::string models_json(const ServerState& s) {
  Json data = Json::array();
  for (const ServedModel& m : s.models) {
    Json j = Json::object();
    j["id"] = m.id;
    j["object"] = "model";
    j["created"] = s.created;
    j["owned_by"] = "agentkv";
    // Whether /v1/rounds shares KV on this model, and the start-up quality gate's measurement.
    Json sharing = Json::object();
    sharing["rounds"] = s.opt.round_sharing && m.sharing_allowed;
    sharing["recompute"] = s.opt.recompute;
    if (!m.gate_summary.empty()) sharing["quality_gate"] = m.gate_summary;
    // Whether chat completions share their messages' KV by default, and that path's gate.
    sharing["chat"] = s.opt.chat_sharing && m.chat_sharing_allowed;
    sharing["chat_recompute"] = s.opt.chat_recompute;
    if (!m.chat_gate_summary.empty()) sharing["chat_quality_gate"] = m.chat_gate_summary;
    j["kv_sharing"] = std::move(sharing);
    // What POST /v1/agents/{id}/score reads on this model.
    Json verifier = Json::object();
    verifier["kind"] = !m.verify_head ? "none" : prm::verifier_kind(*m.verify_head);
    verifier["summary"] = m.verifier_summary;
    j["verifier"] = std::move(verifier);
    data.push_back(std::move(j));
  }
  Json out = Json::object();
  out["object"] = "list";
  out["data"] = std::move(data);
  return dump_json(out);
}

// The reply's "kv_sharing": what the request's sharing did (engine/chat_sharing.h).
Json chat_sharing_json(const ChatSharingReport& r) {
  Json j = Json::object();
  j["mode"] = r.mode;
  j["reason"] = r.reason;
  j["recompute"] = r.recompute;
  j["shared_tokens"] = r.shared_tokens();
  j["recomputed_tokens"] = r.recomputed_tokens;
  j["segments"] = r.segments;
  j["resumed_tokens"] = r.resumed_tokens;
  j["segment_tokens"] = r.segment_tokens;
  j["fetched_masters"] = r.fetched_masters;
  j["master_tokens_restored"] = r.master_tokens_restored;
  j["master_tokens_computed"] = r.master_tokens_computed;
  return j;
}


// Whether a chat request shares its messages' KV (the request's kv_sharing, the server's default and
// the model's gate), and if so its message segments; *sharing says why not when it does not.
std::optional<ChatSharingRequest> plan_chat_sharing(const ServerState& s, const ServedModel& m,
                                                    const CompletionRequest& cr, const std::string& text,
                                                    const std::vector<int32_t>& prompt, ChatSharingReport* sharing) {
  sharing->recompute = cr.recompute.value_or(s.opt.chat_recompute);
  if (!cr.kv_sharing.value_or(s.opt.chat_sharing)) {
    sharing->reason = cr.kv_sharing ? "kv_sharing is false" : "KV sharing of chat is off on this server (serve --chat-sharing off)";
    return std::nullopt;
  }
  if (!m.chat_sharing_allowed) {
    sharing->reason = "model '" + m.id + "' failed its start-up quality gate for chat sharing (" + m.chat_gate_summary + ")";
    return std::nullopt;
  }
  // Each message's content as its own piece, so it is the same ids wherever it sits. Where that
  // tokenizes differently from the whole text, the request runs exactly (the same tokens as always).
  AgentContextTokens pieces = chat_message_pieces(*m.lm->tokenizer, text, cr.messages);
  if (pieces.tokens != prompt) {
    sharing->reason = "the messages do not tokenize on their own as they do in the prompt";
    return std::nullopt;
  }
  ChatSharingRequest r;
  r.segments = std::move(pieces.segments);
  r.recompute = sharing->recompute;
  return r;
}

// Validates and posts the chat-sharing job (engine/chat_sharing.h); its events go to `box` and its
// report, complete with the final event, to `report`. Returns the answering request's id.
Result<uint64_t> start_chat_job(ServerState& s, size_t model, ChatSharingRequest req,
                                std::shared_ptr<Mailbox<RequestEvent>> box, std::shared_ptr<ChatSharingReport> report) {
  AGENTKV_TRY(s.models[model].engine->validate(req.params));
  req.request_id = s.models[model].engine->next_request_id();
  const uint64_t id = req.request_id;
  EngineLoop* loop = s.loop.get();
  auto job = std::make_shared<ChatSharingRequest>(std::move(req));
  const bool posted = loop->post(
      [job, box, report, loop, model](Engine& e) {
        start_chat_request(e, std::move(*job), [box, report, loop, model](const RequestEvent& ev, const ChatSharingReport& r) {
          if (ev.request_finished) {
            *report = r;
            loop->publish_metrics(model);  // a client with its answer sees its work done
          }
          box->put(ev, ev.request_finished);
        });
      },
      model);
  if (!posted) return make_error(ErrorCode::kUnavailable, "the engine is shutting down");
  return id;
}

// A prompt whose tokenization stopped past the context (413; its exact length is not known).
ApiError over_context(const std::string& what, const std::string& param, int n_ctx) {
  return api_error(ErrorCode::kTooLarge, what + " holds more tokens than the model's context of " + std::to_string(n_ctx), param);
}

// Streams one event's pieces of a choice whose answer may hold tool calls: text as content deltas,
// calls as tool_calls deltas (OpenAI's shape); the choice's last chunk carries its finish_reason.
bool stream_tool_deltas(const CompletionRequest& cr, const std::string& rid, int64_t created, int index,
                        const std::vector<ToolCallStream::Delta>& deltas, const std::string& reason,
                        std::vector<bool>& started, const std::function<bool(const Json&)>& send) {
  auto first = [&] {
    const bool f = !started[size_t(index)];
    started[size_t(index)] = true;
    return f;
  };
  for (const ToolCallStream::Delta& d : deltas) {
    Json j;
    if (d.kind == ToolCallStream::Delta::Kind::kText)
      j = stream_chunk_json(cr, rid, created, index, d.text, "", first(), nullptr, nullptr, nullptr);
    else if (d.kind == ToolCallStream::Delta::Kind::kCallStart)
      j = stream_tool_call_chunk_json(cr, rid, created, index, d.call, &d.id, &d.text, "", first());
    else
      j = stream_tool_call_chunk_json(cr, rid, created, index, d.call, nullptr, nullptr, d.text, first());
    if (!send(j)) return false;
  }
  if (reason.empty()) return true;
  return send(stream_chunk_json(cr, rid, created, index, "", reason, first(), nullptr, nullptr, nullptr));
}

}  // namespace

void handle_models(const ServerState& s, const HttpRequest& req, HttpResponseWriter& w) {
  if (req.method != "GET") return reply(w, ApiError{405, "use GET /v1/models", ""});
  w.respond(200, "application/json", models_json(s));
}

void handle_completion(ServerState& s, const HttpRequest& req, HttpResponseWriter& w, bool chat) {
  auto body = parse_body(req, w, false);
  if (!body) return;
  CompletionRequest cr;
  if (auto e = parse_completion_request(*body, chat, s.opt.limits, &cr)) return reply(w, *e);
  log_ignored_fields_once(cr.ignored_fields);
  const int mi = s.find_model(cr.model);
  if (mi < 0) return reply(w, unknown_model(cr.model));
  const ServedModel& m = s.models[size_t(mi)];
  const Tokenizer& tok = *m.lm->tokenizer;
  const ToolCallSyntax syntax = tool_call_syntax(tok);  // the model's tool-call syntax, read once
  RequestParams p;
  // Chat sharing (engine/chat_sharing.h): on by default where the server and the model's gate allow.
  ChatSharingReport sharing;
  std::optional<ChatSharingRequest> shared;
  std::shared_ptr<const Grammar> grammar;  // response_format, tools (server/structured_output.h)
  if (chat) {
    if (auto e = output_grammar(cr, syntax, &grammar)) return reply(w, *e);
    auto chat_text = render_chat(tok, cr.messages, true, offered_tools(cr));
    if (!chat_text.ok()) return reply(w, api_error(chat_text.status_error(), "messages"));
    // Message content never becomes a special token; tokenizing stops once past the context.
    auto ids = encode_chat(tok, *chat_text, m.engine->n_ctx());
    if (!ids) return reply(w, over_context("the messages", "messages", m.engine->n_ctx()));
    p.prompt = std::move(*ids);
    shared = plan_chat_sharing(s, m, cr, chat_text->text, p.prompt, &sharing);
  } else if (cr.prompt_is_tokens) {
    p.prompt = cr.prompt_tokens;
  } else {
    auto ids = tok.encode_within(cr.prompt, tok.add_bos_default(), false, m.engine->n_ctx());
    if (!ids) return reply(w, over_context("the prompt", "prompt", m.engine->n_ctx()));
    p.prompt = std::move(*ids);
  }
  // OpenAI's defaults: 16 tokens for completions; chat runs to the end of the context.
  if (auto e = fit_max_tokens("the prompt", chat ? "messages" : "prompt", int64_t(p.prompt.size()), m.engine->n_ctx(),
                              cr.max_tokens, chat ? std::nullopt : std::optional<int>(16), s.opt.limits.max_tokens_limit,
                              &p.max_tokens))
    return reply(w, *e);
  apply_sampling(cr, &p);
  p.sampling.grammar = grammar;
  p.stop_repeated_tool_calls = chat && calls_allowed(cr) && cr.parallel_tool_calls && syntax.parallel;
  p.n = cr.n;
  p.top_logprobs = cr.logprobs;
  p.announce_admission = cr.stream;
  const int n_prompt = int(p.prompt.size());

  auto box = std::make_shared<Mailbox<RequestEvent>>();
  Result<uint64_t> id = uint64_t(0);
  auto gone = std::make_shared<std::atomic<bool>>(false);
  auto report = std::make_shared<ChatSharingReport>();  // the job's, complete with its final event
  if (shared) {
    shared->params = std::move(p);
    shared->cancelled = gone;
    id = start_chat_job(s, size_t(mi), std::move(*shared), box, report);
  } else {
    id = s.loop->submit(std::move(p), [box](const RequestEvent& ev) { box->put(ev, ev.request_finished); }, size_t(mi));
  }
  if (!id.ok()) return reply(w, api_error(id.status_error()));
  auto cancel = [&] {
    gone->store(true);
    s.loop->cancel(*id, size_t(mi));
  };
  const std::string rid = request_id(chat);
  const int64_t created = unix_now();
  std::vector<ChoiceOutput> choices(size_t(cr.n));
  for (int i = 0; i < cr.n; ++i) choices[size_t(i)].index = i;
  std::vector<bool> started(size_t(cr.n), false);
  // Tool calls: each choice's answer split into text and calls as it streams.
  std::vector<ToolCallStream> calls;
  if (chat && calls_allowed(cr))
    for (int i = 0; i < cr.n; ++i)
      calls.emplace_back(true, text_allowed(cr), "call_" + rid.substr(rid.find('-') + 1) + "_" + std::to_string(i),
                         syntax);
  UsageCounts usage;
  usage.prompt_tokens = n_prompt;
  bool streaming = false;
  auto send = [&](const Json& j) { return w.write("data: " + dump_json(j) + "\n\n"); };
  std::optional<Error> error;
  while (!box->finished()) {
    // A client that went away has its request cancelled (its blocks freed) and gets nothing more.
    const std::vector<RequestEvent> batch = box->take(w, cancel);
    if (box->client_gone()) return;
    // The stream starts with the first events (the admission event, RequestParams::announce_admission),
    // unless they are a refusal before any work (engine/kv_admission.h), which gets its HTTP status as
    // a non-streamed request does.
    const bool refused = box->finished() && std::none_of(batch.begin(), batch.end(), [](const RequestEvent& ev) {
                           return ev.has_token;
                         }) && std::any_of(batch.begin(), batch.end(), [](const RequestEvent& ev) { return !ev.error.empty(); });
    if (cr.stream && !streaming && !batch.empty() && !refused) {
      if (!w.start_stream(200, "text/event-stream", {{"Cache-Control", "no-cache"}})) {
        cancel();
        return;
      }
      streaming = true;
    }
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
      std::vector<ToolCallStream::Delta> deltas;
      if (!calls.empty()) {
        ToolCallStream& tc = calls[size_t(ev.seq_index)];
        deltas = tc.push(ev.text);
        if (ev.seq_finished)
          for (auto& d : tc.finish()) deltas.push_back(std::move(d));
      }
      std::string reason;
      if (ev.seq_finished) {
        reason = openai_finish_reason(ev.finish_reason);
        if (!calls.empty() && calls[size_t(ev.seq_index)].has_calls() && reason == "stop") reason = "tool_calls";
        c.finish_reason = reason;
      }
      if (streaming && !calls.empty()) {
        if (!stream_tool_deltas(cr, rid, created, ev.seq_index, deltas, reason, started, send)) {
          cancel();
          return;
        }
        continue;
      }
      if (streaming && (!ev.text.empty() || ev.seq_finished || (cr.logprobs >= 0 && counted))) {
        const bool first = !started[size_t(ev.seq_index)];
        started[size_t(ev.seq_index)] = true;
        const bool with_lp = cr.logprobs >= 0 && counted;
        if (!send(stream_chunk_json(cr, rid, created, ev.seq_index, ev.text, reason, first,
                                    with_lp ? &ev.logprob : nullptr, with_lp ? &tok_text : nullptr,
                                    with_lp ? &top_texts : nullptr))) {
          cancel();
          return;
        }
      }
    }
  }
  if (error) {
    if (streaming) {
      // After tokens: each failed choice's last chunk said finish_reason "error"; then the error
      // object, and the stream still ends as every stream does.
      w.write("data: " + error_json(api_error(*error)) + "\n\n");
      w.write("data: [DONE]\n\n");
      w.end_stream();
    } else {
      reply(w, api_error(*error));
    }
    return;
  }
  if (shared) sharing = *report;
  if (streaming) {
    if (cr.include_usage) {
      Json chunk = stream_usage_chunk_json(cr, rid, created, usage);
      if (chat) chunk["kv_sharing"] = chat_sharing_json(sharing);
      send(chunk);
    }
    w.write("data: [DONE]\n\n");
    w.end_stream();
    return;
  }
  for (size_t i = 0; i < calls.size(); ++i)
    if (calls[i].has_calls()) {
      choices[i].tool_calls = calls[i].calls();
      choices[i].text.clear();
    }
  Json out = completion_response_json(cr, rid, created, choices, usage);
  if (chat) out["kv_sharing"] = chat_sharing_json(sharing);
  w.respond(200, "application/json", dump_json(out));
}

}  // namespace agentkv
