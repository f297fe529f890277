// POST /v1/rounds: an all-gather round. Every listed agent gets the round's message (the shared block,
// by default every agent's last answer, then the instruction) and answers it; all turns run together
// as collective-round jobs (server/kv_jobs.h: run_turns), sharing the block's KV where allowed.
#include "server/error_status.h"
#include "server/kv_jobs.h"
#include "server/routes.h"

namespace agentkv {

void handle_round(ServerState& s, const HttpRequest& req, HttpResponseWriter& w) {
  auto body = parse_body(req, w, false);
  if (!body) return;
  RoundRequest rr;
  if (auto e = parse_round(*body, s.opt.limits, s.opt.agent_limits, &rr)) return reply(w, *e);
  std::vector<Agent> as;
  if (auto e = s.agents->acquire(rr.agents, &as)) return reply(w, *e);
  auto abandon_all = [&] {
    for (const Agent& a : as) s.agents->abandon(a.id);
  };
  // The shared block: the caller's text, or every listed agent's last answer (all-gather).
  std::string shared;
  if (rr.shared) {
    shared = *rr.shared;
  } else {
    for (const Agent& a : as)
      if (!a.last_answer.empty()) shared += a.name + ": " + a.last_answer + "\n";
    if (shared.empty()) {
      abandon_all();
      return reply(w, api_error(ErrorCode::kInvalidArgument,
                                "no agent in the round has answered yet: give 'shared' text for the first round", "shared"));
    }
    shared.pop_back();
  }
  std::string content = shared;
  if (!rr.instruction.empty()) content += (content.empty() ? "" : "\n\n") + rr.instruction;
  if (content.empty()) {
    abandon_all();
    return reply(w, api_error(ErrorCode::kInvalidArgument, "the round's message is empty: give 'shared' or 'instruction'",
                              "shared"));
  }
  for (Agent& a : as) {
    a.messages.push_back(ChatMessage{"user", content});
    if (!shared.empty()) a.segments.push_back(shared);
  }
  std::vector<TurnAnswer> turns;
  RoundSharingReport sharing;
  std::optional<double> recompute;
  if (!s.opt.round_sharing) sharing.reason = "KV sharing is off on this server (serve --round-sharing off)";
  else if (!rr.kv_sharing.value_or(true)) sharing.reason = "kv_sharing is false";
  else recompute = rr.recompute.value_or(s.opt.recompute);
  if (!run_turns(s, as, rr.gen, w, &turns, recompute, &sharing)) return;
  Json answers = Json::array();
  UsageCounts total;
  for (size_t i = 0; i < as.size(); ++i) {
    const Agent& a = as[i];
    const TurnAnswer& j = turns[i];
    answers.push_back(agent_answer_json(AgentAnswer{a.id, a.name, j.text, openai_finish_reason(j.finish_reason), j.usage}));
    total.prompt_tokens += j.usage.prompt_tokens;
    total.completion_tokens += j.usage.completion_tokens;
    total.cached_tokens += j.usage.cached_tokens;
  }
  Json out = Json::object();
  out["object"] = "round";
  out["shared"] = shared;
  out["answers"] = std::move(answers);
  out["usage"] = total;
  out["kv_sharing"] = round_sharing_json(sharing);
  w.respond(200, "application/json", dump_json(out));
}

}  // namespace agentkv
