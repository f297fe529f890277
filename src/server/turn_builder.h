// The turn builder: what one generation asks of the engine, from the request's sampling fields and
// the model's context. fit_max_tokens is the server's one max_tokens rule (completions, chat,
// agents' turns); build_turn renders an agent's turn (its messages through the chat template, the
// round's marked segments) into the request respond, rounds and score run.
#pragma once

#include <optional>
#include <string>
#include <utility>

#include "engine/request.h"
#include "server/agent_registry.h"
#include "server/openai_protocol.h"
#include "tokenizer/tokenizer.h"

namespace agentkv {

// max_tokens for a generation after `n_prompt` tokens of `what` ("the prompt", "the context of agent
// 'x'") in a context of n_ctx: the request's `asked`, else `fixed_default`, else as many as the
// context leaves (at most `limit`). 413 when the prompt leaves no room (engine's check_context), 400
// when `asked` does not fit.
std::optional<ApiError> fit_max_tokens(const std::string& what, const std::string& param, int64_t n_prompt, int n_ctx,
                                       std::optional<int> asked, std::optional<int> fixed_default, int limit,
                                       int* out);

// One agent's turn: the request (prompt, limits, sampling, resumed from the agent's resident KV,
// keeping the new context) and the round's block in the prompt ([first, second) tokens; -1: none).
struct AgentTurn {
  RequestParams params;
  std::pair<int64_t, int64_t> segment{-1, -1};
};

// The turn of `a` (whose messages end with what it answers), the assistant's turn open: respond
// and rounds generate from it, score appends its steps to it.
std::optional<ApiError> build_turn(const Agent& a, const Tokenizer& tok, int n_ctx, const SamplingFields& gen,
                                   const ApiLimits& limits, AgentTurn* out);

}  // namespace agentkv
