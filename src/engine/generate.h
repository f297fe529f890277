// Prompt → completion for one sequence: prefill, sample, stop at end-of-generation tokens or stop
// strings, stream text as it becomes valid UTF-8.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/request.h"
#include "engine/sampler.h"
#include "model/loaded_model.h"

namespace agentkv {

struct GenerateOptions {
  SamplingParams sampling;
  int max_tokens = 128;
  std::vector<std::string> stop;  // stop strings (not included in the output)
  int n_ctx = 0;                  // 0: prompt + max_tokens
};

struct GenerateResult {
  std::string text;
  std::vector<int32_t> tokens;   // generated ids (engine/request_outcome.h: the EOG that ended it is not one)
  FinishReason finish_reason = FinishReason::kNone;  // kStop (EOG or stop string) or kLength
  int n_prompt = 0;
  double prefill_seconds = 0;
  double decode_seconds = 0;
};

// The context generate runs under: opt.n_ctx, else prompt + max_tokens, at most the training context.
int generate_n_ctx(const ModelConfig& cfg, int64_t n_prompt, const GenerateOptions& opt);

// lm must be loaded for generate_n_ctx's context (fit_model_to_context) when it is a LongRoPE file.
Result<GenerateResult> generate(const LoadedModel& lm, const std::vector<int32_t>& prompt,
                                const GenerateOptions& opt, ThreadPool& pool,
                                const std::function<void(std::string_view)>& on_text = {});

}  // namespace agentkv
