#include "engine/single_sequence.h"

#include <algorithm>
#include <numeric>

namespace agentkv {

SingleSequence::SingleSequence(const Model& model, int n_ctx, int chunk, int block_size)
    : model_(model),
      n_ctx_(n_ctx),
      chunk_(std::max(1, chunk)),
      arena_(model.config(), block_size, (int64_t(n_ctx) + block_size - 1) / block_size),
      table_(size_t(arena_.n_blocks())) {
  std::iota(table_.begin(), table_.end(), 0);
}

Status SingleSequence::eval(std::span<const int32_t> tokens, size_t logits_from, std::vector<float>& logits,
                            ThreadPool& pool) {
  if (!arena_.valid())
    return make_error("eval: could not map " + std::to_string(arena_.n_blocks() * arena_.bytes_per_block()) +
                      " bytes of KV memory for a context of " + std::to_string(n_ctx_));
  if (tokens.empty()) return make_error("eval: no tokens");
  if (logits_from >= tokens.size()) return make_error("eval: logits_from past the last token");
  if (int64_t(n_past_) + int64_t(tokens.size()) > n_ctx_)
    return make_error("context full: " + std::to_string(n_past_) + " + " + std::to_string(tokens.size()) +
                      " tokens exceed the context of " + std::to_string(n_ctx_));
  const int64_t n_vocab = model_.config().n_vocab;
  logits.assign((tokens.size() - logits_from) * n_vocab, 0.0f);
  size_t done = 0;
  while (done < tokens.size()) {
    const size_t n = std::min(tokens.size() - done, size_t(chunk_));
    batch_.clear();
    batch_.seqs.push_back(SeqBlocks{table_.data(), int32_t(table_.size())});
    for (size_t i = 0; i < n; ++i) {
      batch_.add(tokens[done + i], n_past_, 0, n_past_, done + i >= logits_from);
      ++n_past_;
    }
    float* out = logits.data() + (done > logits_from ? done - logits_from : 0) * n_vocab;
    Status st = model_.forward(batch_, arena_, out, pool);
    if (!st.ok()) {
      n_past_ -= int(n);
      return st;
    }
    done += n;
  }
  return {};
}

}  // namespace agentkv
