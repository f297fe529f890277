// Perplexity the way llama.cpp's llama-perplexity computes it: the text is tokenized once (with BOS
// when the model adds one), cut into chunks of n_ctx tokens; each chunk starts a fresh context whose
// first token is replaced by BOS if the model uses one; the negative log-likelihood is averaged over
// the second half of every chunk (predicting token j+1 from position j for j in [n_ctx/2, n_ctx-1)).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "model/loaded_model.h"

namespace agentkv {

struct PerplexityResult {
  double ppl = 0;
  double nll = 0;       // mean negative log-likelihood
  int n_chunks = 0;
  int64_t n_scored = 0;  // tokens scored
  int64_t n_tokens = 0;  // tokens in the text
};

Result<PerplexityResult> perplexity(const LoadedModel& lm, const std::string& text, int n_ctx, ThreadPool& pool,
                                    const std::function<void(int chunk, double ppl_so_far)>& on_chunk = {});

}  // namespace agentkv
