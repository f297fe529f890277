// libFuzzer target for the agents and rounds API's request validation (server/agents_protocol.h):
// any JSON body must either parse into a request or give a 4xx with a message, never crash.
// Build: see fuzz/json_fuzz.cpp; scripts/fuzz.sh agents_request_fuzz.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

#include "server/agents_protocol.h"

namespace {

void check(const std::optional<agentkv::ApiError>& e) {
  if (e && (e->status < 400 || e->status > 499 || e->message.empty())) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto j = agentkv::parse_json(std::string_view(reinterpret_cast<const char*>(data), size), 32);
  if (!j.ok()) return 0;
  const agentkv::ApiLimits limits;
  const agentkv::AgentLimits al;
  agentkv::AgentCreateRequest create;
  check(agentkv::parse_agent_create(*j, limits, al, &create));
  std::vector<agentkv::ChatMessage> msgs;
  check(agentkv::parse_agent_messages(*j, limits, &msgs));
  agentkv::AgentRespondRequest respond;
  check(agentkv::parse_agent_respond(*j, limits, &respond));
  agentkv::AgentForkRequest fork;
  check(agentkv::parse_agent_fork(*j, al, &fork));
  agentkv::RoundRequest round;
  auto e = agentkv::parse_round(*j, limits, al, &round);
  check(e);
  if (!e && round.agents.empty()) __builtin_trap();
  agentkv::AgentExport imported;
  e = agentkv::parse_agent_import(*j, limits, al, &imported);
  check(e);
  if (!e && imported.model.empty()) __builtin_trap();
  agentkv::StepScoreRequest score;
  e = agentkv::parse_step_score(*j, limits, al, &score);
  check(e);
  if (!e && (score.steps.empty() || score.steps.size() > al.max_score_steps)) __builtin_trap();
  return 0;
}
