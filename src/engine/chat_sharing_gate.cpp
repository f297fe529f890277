// The chat path's quality gate (engine/chat_sharing_gate.h).
#include "engine/chat_sharing_gate.h"

#include <optional>

#include "engine/chat_sharing.h"
#include "engine/request_outcome.h"
#include "share/turn_pieces.h"
#include "tokenizer/chat_template.h"

namespace agentkv {

namespace {

// Fixed (bump the version when it or the measured path changes): four agents, two turns each, in a
// round robin after a moderator's opening, 32 greedy tokens per answer.
// Version 2: as the rounds gate's version 3 (only the last context token re-run).
constexpr int kChatGateVersion = 2;
constexpr int kChatGateTurns = 8;
constexpr int kChatGateTokens = 32;
constexpr int kChatGateMinTokens = 8;
constexpr const char* kNames[] = {"Ada", "Bram", "Cleo", "Dov"};
constexpr const char* kPersonas[] = {
    "a cheerful baker who has lived in Elm Hollow for 12 years and knows everyone",
    "a grumpy blacksmith who has lived in Elm Hollow for 30 years and distrusts new ideas",
    "a curious teacher who arrived in Elm Hollow two years ago and asks many questions",
    "a careful farmer whose fields lie by the river outside Elm Hollow",
};
constexpr const char* kOpening =
    "Moderator: The river flooded the lower fields last night and the old bridge is closed. Decide together "
    "what the village does first.";

std::vector<ChatMessage> request_messages(size_t agent, const std::vector<std::string>& transcript, bool alternate) {
  std::vector<ChatMessage> msgs;
  msgs.push_back(ChatMessage{"system", std::string("You are ") + kNames[agent] + ", " + kPersonas[agent] +
                                           ". You are in a group chat with your neighbours. Speak in the first "
                                           "person, in one or two sentences."});
  for (size_t k = 0; k < transcript.size(); ++k)
    msgs.push_back(ChatMessage{alternate && k % 2 == 1 ? "assistant" : "user", transcript[k]});
  return msgs;
}

Result<GateMeasurement> measure_chat_gate(const LoadedModel& lm, ThreadPool& pool, double recompute,
                                          DiffFormat format) {
  std::unique_ptr<Engine> engine;
  GatePath path;
  path.format = format;
  AGENTKV_ASSIGN_OR_RETURN(engine, make_gate_engine(lm, pool, path));
  const Tokenizer& tok = *lm.tokenizer;
  std::vector<std::string> transcript{kOpening};
  // Templates that want alternating roles (Gemma's) get user/assistant by position, the same for
  // every agent; the others get every message as a user message, as group-chat frameworks send.
  const bool alternate = !apply_chat_template(tok, request_messages(0, {kOpening, kOpening}, false), true).ok();
  GateMeasurement m;
  for (int t = 0; t < kChatGateTurns; ++t) {
    const size_t agent = size_t(t) % std::size(kNames);
    const std::vector<ChatMessage> msgs = request_messages(agent, transcript, alternate);
    std::string text;
    AGENTKV_ASSIGN_OR_RETURN(text, apply_chat_template(tok, msgs, true));
    AgentContextTokens pieces = chat_message_pieces(tok, text, msgs);
    if (pieces.tokens != tok.encode(text, tok.add_bos_default(), true))
      return make_error("chat gate: the messages do not tokenize on their own as in the prompt");
    ChatSharingRequest req;
    req.params.prompt = pieces.tokens;
    req.params.max_tokens = kChatGateTokens;
    req.params.min_tokens = kChatGateMinTokens;
    req.params.sampling.temperature = 0;
    req.segments = pieces.segments;
    req.recompute = recompute;
    req.request_id = engine->next_request_id();
    req.keep_start = true;
    RequestOutcome answer;
    std::optional<ChatSharingReport> report;
    start_chat_request(*engine, req, [&](const RequestEvent& ev, const ChatSharingReport& r) {
      if (ev.seq_index == 0) fold(answer, ev);
      if (ev.request_finished) report = r;
    });
    AGENTKV_TRY(engine->run_until_idle());
    if (!report) return make_error("chat gate: the request did not finish");
    if (answer.error) {
      engine->release_retained(report->start_handle);
      return *answer.error;
    }
    if (report->start_handle && report->mode == "tokendance") {
      // Every answer that went through the sharing path (at R = 1 all its reused tokens are recomputed).
      // The answer against the exact context of the tokens its start context held.
      std::vector<RoundTurn> turns(1);
      turns[0].params = req.params;
      turns[0].segment = {0, report->start_tokens};
      CollectiveRoundResult got;
      got.turns.resize(1);
      got.turns[0].answer = answer;
      got.turns[0].shared = true;
      got.turns[0].blended = report->start_handle;
      auto q = measure_round_quality(*engine, turns, got, kChatGateTokens);
      engine->release_retained(report->start_handle);
      if (!q.ok()) return q.status_error();
      add_gate_measurement(m, *q);
    } else {
      engine->release_retained(report->start_handle);
    }
    transcript.push_back(std::string(kNames[agent]) + ": " + answer.text);
  }
  return m;
}

}  // namespace

Result<SharingGateResult> run_chat_sharing_gate(const LoadedModel& lm, ThreadPool& pool, double recompute,
                                                const SharingGateThresholds& th, const std::string& cache_dir,
                                                DiffFormat format) {
  return run_gate_cached(lm, pool, recompute, th, cache_dir, "chat-", kChatGateVersion, measure_chat_gate, format);
}

}  // namespace agentkv
