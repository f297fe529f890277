// SingleSequence (single_sequence.h): the context check, then kv/direct_prefill with the kernels
// chosen by token count.
#include "engine/single_sequence.h"

#include <algorithm>
#include <string>

namespace agentkv {

SingleSequence::SingleSequence(const Model& model, int n_ctx, int chunk, int block_size)
    : model_(model),
      n_ctx_(n_ctx),
      chunk_(std::max(1, chunk)),
      kv_(private_kv_manager(model.config(), 0, n_ctx, block_size)) {
  if (kv_.ok()) seq_ = std::make_unique<KvSequence>(**kv_);
}

Status SingleSequence::eval(std::span<const int32_t> tokens, size_t logits_from, std::vector<float>& logits,
                            ThreadPool& pool) {
  if (!kv_.ok())
    return make_error(kv_.code(), "eval: a context of " + std::to_string(n_ctx_) + ": " + kv_.error());
  if (tokens.empty()) return make_error("eval: no tokens");
  if (logits_from >= tokens.size()) return make_error("eval: logits_from past the last token");
  if (int64_t(n_past()) + int64_t(tokens.size()) > n_ctx_)
    return make_error(ErrorCode::kTooLarge, "context full: " + std::to_string(n_past()) + " + " +
                                                std::to_string(tokens.size()) + " tokens exceed the context of " +
                                                std::to_string(n_ctx_));
  return prefill_sequence(model_, **kv_, *seq_, tokens, pool, RowOutputs{&logits},
                          PrefillOptions{.n_tile_tokens = -1, .rows_from = int64_t(logits_from)}, chunk_);
}

}  // namespace agentkv
