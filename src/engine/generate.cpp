#include "engine/generate.h"

#include <chrono>

#include "engine/single_sequence.h"
#include "engine/text_stream.h"

namespace agentkv {

namespace {
double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
}  // namespace

Result<GenerateResult> generate(const LoadedModel& lm, const std::vector<int32_t>& prompt,
                                const GenerateOptions& opt, ThreadPool& pool,
                                const std::function<void(std::string_view)>& on_text) {
  if (prompt.empty()) return make_error("empty prompt");
  if (opt.max_tokens < 0) return make_error("max_tokens must be >= 0");
  AGENTKV_TRY(opt.sampling.validate());
  const ModelConfig& cfg = lm.config();
  int n_ctx = opt.n_ctx > 0 ? opt.n_ctx : int(prompt.size()) + opt.max_tokens;
  if (int64_t(prompt.size()) + opt.max_tokens > cfg.n_ctx_train)
    n_ctx = std::min(n_ctx, cfg.n_ctx_train);
  if (int(prompt.size()) >= n_ctx)
    return make_error("prompt of " + std::to_string(prompt.size()) + " tokens does not fit the context of " +
                      std::to_string(n_ctx));
  SingleSequence seq(*lm.model, n_ctx);
  Sampler sampler(opt.sampling);
  GenerateResult res;
  res.n_prompt = int(prompt.size());
  std::vector<int32_t> history = prompt;
  std::vector<float> logits;
  double t0 = now_seconds();
  AGENTKV_TRY(seq.eval(prompt, prompt.size() - 1, logits, pool));
  double t1 = now_seconds();
  res.prefill_seconds = t1 - t0;
  res.finish_reason = "length";
  TextStream stream(*lm.tokenizer, opt.stop);
  for (int i = 0; i < opt.max_tokens; ++i) {
    const int32_t tok = sampler.sample(logits.data(), cfg.n_vocab, history);
    if (lm.tokenizer->is_eog(tok)) {
      res.finish_reason = "stop";
      break;
    }
    res.tokens.push_back(tok);
    history.push_back(tok);
    const std::string piece = stream.push(tok);
    if (on_text && !piece.empty()) on_text(piece);
    if (stream.stopped()) {
      res.finish_reason = "stop";
      break;
    }
    if (i + 1 == opt.max_tokens || seq.n_past() >= n_ctx) break;
    const int32_t next[1] = {tok};
    AGENTKV_TRY(seq.eval(next, 0, logits, pool));
  }
  const std::string rest = stream.finish();
  if (on_text && !rest.empty()) on_text(rest);
  res.text = stream.text();
  res.decode_seconds = now_seconds() - t1;
  return res;
}

}  // namespace agentkv
