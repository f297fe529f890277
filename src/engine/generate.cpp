#include "engine/generate.h"

#include "engine/engine.h"
#include "engine/request_outcome.h"
#include "util/monotonic_clock.h"

namespace agentkv {

int generate_n_ctx(const ModelConfig& cfg, int64_t n_prompt, const GenerateOptions& opt) {
  const int64_t n_ctx = opt.n_ctx > 0 ? int64_t(opt.n_ctx) : n_prompt + opt.max_tokens;
  return int(std::min<int64_t>(n_ctx, cfg.n_ctx_train));
}

// One request on a private engine: the same scheduler, KV blocks and batch-invariant kernels as the
// server, so `agentkv generate` and a greedy server request give the same tokens.
Result<GenerateResult> generate(const LoadedModel& lm, const std::vector<int32_t>& prompt,
                                const GenerateOptions& opt, ThreadPool& pool,
                                const std::function<void(std::string_view)>& on_text) {
  if (prompt.empty()) return make_error("empty prompt");
  if (opt.max_tokens < 0) return make_error("max_tokens must be >= 0");
  AGENTKV_TRY(opt.sampling.validate());
  const ModelConfig& cfg = lm.config();
  const int n_ctx = generate_n_ctx(cfg, int64_t(prompt.size()), opt);
  AGENTKV_TRY(check_context(int64_t(prompt.size()), n_ctx, "the prompt"));
  EngineOptions eo;
  eo.n_ctx = n_ctx;
  eo.kv.prefix_caching = false;
  eo.kv.mem_bytes = KvArena::bytes_per_block(cfg, eo.kv.block_size) * (int64_t(n_ctx) / eo.kv.block_size + 2);
  std::unique_ptr<Engine> engine;
  AGENTKV_ASSIGN_OR_RETURN(engine, Engine::create(lm, eo, pool));
  RequestParams p;
  p.prompt = prompt;
  p.sampling = opt.sampling;
  p.max_tokens = std::min(opt.max_tokens, n_ctx - int(prompt.size()));
  p.stop = opt.stop;
  GenerateResult res;
  res.n_prompt = int(prompt.size());
  const double t0 = monotonic_seconds();
  double t_first = -1;
  RequestOutcome out;
  auto id = engine->add_request(std::move(p), [&](const RequestEvent& ev) {
    if (ev.has_token && t_first < 0) t_first = monotonic_seconds();
    fold(out, ev);
    if (on_text && !ev.text.empty()) on_text(ev.text);
  });
  if (!id.ok()) return std::move(id).take_error();
  AGENTKV_TRY(engine->run_until_idle());
  if (out.error) return *out.error;
  res.text = std::move(out.text);
  res.tokens = std::move(out.tokens);
  res.finish_reason = out.finish;
  const double t1 = monotonic_seconds();
  res.prefill_seconds = (t_first < 0 ? t1 : t_first) - t0;
  res.decode_seconds = t1 - (t_first < 0 ? t1 : t_first);
  return res;
}

}  // namespace agentkv
