#include "engine/generate.h"

#include <chrono>

#include "engine/single_sequence.h"

namespace agentkv {

namespace {
double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
}  // namespace

size_t complete_utf8_prefix(std::string_view s) {
  // Walk back over at most 3 continuation bytes to the last lead byte and check its length.
  size_t n = s.size();
  size_t i = n;
  int cont = 0;
  while (i > 0 && cont < 4 && (static_cast<unsigned char>(s[i - 1]) & 0xC0) == 0x80) {
    --i;
    ++cont;
  }
  if (i == 0) return n;
  const unsigned char lead = static_cast<unsigned char>(s[i - 1]);
  int need = lead < 0x80 ? 1 : (lead >> 5) == 0x6 ? 2 : (lead >> 4) == 0xE ? 3 : (lead >> 3) == 0x1E ? 4 : 1;
  return (cont + 1 < need) ? i - 1 : n;
}

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
  std::string text;      // all generated text
  size_t emitted = 0;    // bytes of text already passed to on_text
  size_t max_stop = 0;
  for (auto& s : opt.stop) max_stop = std::max(max_stop, s.size());
  for (int i = 0; i < opt.max_tokens; ++i) {
    const int32_t tok = sampler.sample(logits.data(), cfg.n_vocab, history);
    if (lm.tokenizer->is_eog(tok)) {
      res.finish_reason = "stop";
      break;
    }
    res.tokens.push_back(tok);
    history.push_back(tok);
    text += lm.tokenizer->token_to_piece(tok, false);
    // Stop strings: cut the text at the first occurrence.
    bool stopped = false;
    for (auto& s : opt.stop) {
      if (s.empty()) continue;
      size_t at = text.find(s, emitted > s.size() ? emitted - s.size() : 0);
      if (at != std::string::npos) {
        text.resize(at);
        stopped = true;
      }
    }
    // Emit what is complete UTF-8 and cannot be the start of a stop string.
    size_t safe = stopped ? text.size() : complete_utf8_prefix(text);
    if (!stopped && max_stop > 0) safe = std::min(safe, text.size() > max_stop - 1 ? text.size() - (max_stop - 1) : 0);
    if (on_text && safe > emitted) {
      on_text(std::string_view(text).substr(emitted, safe - emitted));
      emitted = safe;
    }
    if (stopped) {
      res.finish_reason = "stop";
      break;
    }
    if (i + 1 == opt.max_tokens || seq.n_past() >= n_ctx) break;
    const int32_t next[1] = {tok};
    AGENTKV_TRY(seq.eval(next, 0, logits, pool));
  }
  if (on_text && text.size() > emitted) on_text(std::string_view(text).substr(emitted));
  res.text = std::move(text);
  res.decode_seconds = now_seconds() - t1;
  return res;
}

}  // namespace agentkv
