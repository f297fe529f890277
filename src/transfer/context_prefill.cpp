// Greedy continuation (context_prefill.h): the prompt in one prefill, then one decode step per token,
// both through kv/direct_prefill on a fork of the context.
#include "transfer/context_prefill.h"

#include <algorithm>
#include <vector>

#include "kv/direct_prefill.h"
#include "ops/argmax.h"

namespace agentkv {

Result<std::string> greedy_continuation(const LoadedModel& lm, const KvSequence& ctx, std::span<const int32_t> prompt,
                                        int n_new, ThreadPool& pool,
                                        const std::function<bool(const std::string&)>& done) {
  if (prompt.empty()) return make_error("greedy continuation: empty prompt");
  KvSequence seq = ctx.fork();
  if (!seq.reserve(int64_t(prompt.size()) + n_new))
    return make_error(ErrorCode::kResourceExhausted, "greedy continuation: KV budget too small");
  KvManager& kv = seq.manager();
  std::vector<float> logits;
  AGENTKV_TRY(prefill_sequence(*lm.model, kv, seq, prompt, pool, RowOutputs{&logits}));
  std::vector<int32_t> out;
  for (int i = 0; i < n_new; ++i) {
    const int32_t tok = argmax(logits.data(), int64_t(logits.size()));
    out.push_back(tok);
    if (i + 1 == n_new || (done && done(lm.tokenizer->decode(out)))) break;
    AGENTKV_TRY(prefill_sequence(*lm.model, kv, seq, std::span<const int32_t>(&tok, 1), pool, RowOutputs{&logits},
                                 PrefillOptions{.n_tile_tokens = -1}));  // the decode kernels
  }
  return lm.tokenizer->decode(out);
}

}  // namespace agentkv
