#include "engine/perplexity.h"

#include <cmath>

#include "engine/single_sequence.h"

namespace agentkv {

Result<PerplexityResult> perplexity(const LoadedModel& lm, const std::string& text, int n_ctx, ThreadPool& pool,
                                    const std::function<void(int, double)>& on_chunk) {
  if (n_ctx < 4) return make_error("perplexity: --ctx must be at least 4");
  const Tokenizer& tok = *lm.tokenizer;
  const bool add_bos = tok.add_bos_default();
  std::vector<int32_t> tokens = tok.encode(text, add_bos, false);
  PerplexityResult r;
  r.n_tokens = int64_t(tokens.size());
  if (int64_t(tokens.size()) < 2 * int64_t(n_ctx))
    return make_error("perplexity: the text has " + std::to_string(tokens.size()) + " tokens; need at least " +
                      std::to_string(2 * n_ctx) + " for a context of " + std::to_string(n_ctx));
  const int n_chunks = int(tokens.size() / size_t(n_ctx));
  const int first = n_ctx / 2;
  const int n_vocab = lm.config().n_vocab;
  SingleSequence seq(*lm.model, n_ctx);
  std::vector<float> logits;
  double nll = 0;
  int64_t count = 0;
  for (int c = 0; c < n_chunks; ++c) {
    std::vector<int32_t> chunk(tokens.begin() + int64_t(c) * n_ctx, tokens.begin() + int64_t(c + 1) * n_ctx);
    if (add_bos) chunk[0] = tok.bos_id();
    seq.reset();
    AGENTKV_TRY(seq.eval(chunk, size_t(first), logits, pool));
    for (int j = first; j < n_ctx - 1; ++j) {
      const float* row = logits.data() + size_t(j - first) * n_vocab;
      float mx = row[0];
      for (int v = 1; v < n_vocab; ++v) mx = std::max(mx, row[v]);
      double sum = 0;
      for (int v = 0; v < n_vocab; ++v) sum += std::exp(double(row[v] - mx));
      // Target is the original token (the BOS replacement only affects position 0).
      const int32_t target = tokens[size_t(c) * n_ctx + j + 1];
      nll += -(double(row[target] - mx) - std::log(sum));
      ++count;
    }
    if (on_chunk) on_chunk(c + 1, std::exp(nll / double(count)));
  }
  r.n_chunks = n_chunks;
  r.n_scored = count;
  r.nll = nll / double(count);
  r.ppl = std::exp(r.nll);
  return r;
}

}  // namespace agentkv
