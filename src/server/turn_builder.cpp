// The turn builder (server/turn_builder.h): the one place where a generation's max_tokens meets the
// model's context, and where an agent's messages become the prompt of its turn.
#include "server/turn_builder.h"

#include <algorithm>

#include "engine/engine.h"
#include "server/agent_context.h"
#include "server/error_status.h"

namespace agentkv {

std::optional<ApiError> fit_max_tokens(const std::string& what, const std::string& param, int64_t n_prompt, int n_ctx,
                                       std::optional<int> asked, std::optional<int> fixed_default, int limit,
                                       int* out) {
  if (Status st = check_context(n_prompt, n_ctx, what); !st.ok()) return api_error(st.status_error(), param);
  const int room = n_ctx - int(n_prompt);
  // A default never exceeds the server's --max-tokens (an asked value above it was refused already).
  const int max_tokens = asked ? *asked : fixed_default ? std::min(*fixed_default, limit) : std::min(room, limit);
  if (max_tokens > room)
    return api_error(ErrorCode::kInvalidArgument, "max_tokens " + std::to_string(max_tokens) + " does not fit: " + what +
                                                      " has " + std::to_string(n_prompt) +
                                                      " tokens and the model's context is " + std::to_string(n_ctx),
                     "max_tokens");
  *out = max_tokens;
  return std::nullopt;
}

std::optional<ApiError> build_turn(const Agent& a, const Tokenizer& tok, int n_ctx, const SamplingFields& gen,
                                   const ApiLimits& limits, AgentTurn* out) {
  auto ctx = agent_context_pieces(tok, a.messages, a.segments, true);
  if (!ctx.ok()) return api_error(ctx.code(), "agent '" + a.id + "': " + ctx.error(), "messages");
  AgentTurn t;
  // The last segment is this turn's block only when every earlier one was found too.
  if (!ctx->segments.empty() && ctx->segments.size() == a.segments.size()) t.segment = ctx->segments.back();
  RequestParams& p = t.params;
  if (auto e = fit_max_tokens("the context of agent '" + a.id + "'", "messages", int64_t(ctx->tokens.size()), n_ctx,
                              gen.max_tokens, std::nullopt, limits.max_tokens_limit, &p.max_tokens))
    return e;
  p.prompt = std::move(ctx->tokens);
  apply_sampling(gen, &p);
  p.kv_from = a.kv;
  p.retain_kv = true;
  *out = std::move(t);
  return std::nullopt;
}

}  // namespace agentkv
