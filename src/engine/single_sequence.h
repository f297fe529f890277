// One sequence with its own KV blocks, for the CLI's generate / perplexity / bench until the paged
// engine schedules many sequences: a private KV manager and a context limit around kv/direct_prefill,
// on the kernels llama.cpp picks (by token count), so its logits compare with llama.cpp's goldens.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "kv/direct_prefill.h"
#include "model/model.h"

namespace agentkv {

class SingleSequence {
 public:
  // Capacity n_ctx tokens; prompts are evaluated in chunks of at most `chunk` tokens.
  SingleSequence(const Model& model, int n_ctx, int chunk = int(kPrefillChunk), int block_size = 16);

  int n_past() const { return seq_ ? int(seq_->n_tokens()) : 0; }
  int n_ctx() const { return n_ctx_; }
  void reset() {
    if (seq_) seq_->release();
  }

  // Appends tokens at positions n_past.. and returns the logits of tokens[logits_from..] in order
  // ((tokens.size() - logits_from) * n_vocab floats). Pass tokens.size() - 1 for the last only.
  Status eval(std::span<const int32_t> tokens, size_t logits_from, std::vector<float>& logits, ThreadPool& pool);

 private:
  const Model& model_;
  int n_ctx_;
  int chunk_;
  Result<std::unique_ptr<KvManager>> kv_;
  std::unique_ptr<KvSequence> seq_;  // null when kv_ failed
};

}  // namespace agentkv
