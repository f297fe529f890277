// One sequence with its own KV blocks: the simplest client of Model::forward, used by the CLI's
// generate / perplexity / bench until the paged engine schedules many sequences.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "model/kv_arena.h"
#include "model/model.h"

namespace agentkv {

class SingleSequence {
 public:
  // Capacity n_ctx tokens; prompts are evaluated in chunks of at most `chunk` tokens.
  SingleSequence(const Model& model, int n_ctx, int chunk = 512, int block_size = 16);

  int n_past() const { return n_past_; }
  int n_ctx() const { return n_ctx_; }
  void reset() { n_past_ = 0; }

  // Appends tokens at positions n_past.. and returns the logits of tokens[logits_from..] in order
  // ((tokens.size() - logits_from) * n_vocab floats). Pass tokens.size() - 1 for the last only.
  Status eval(std::span<const int32_t> tokens, size_t logits_from, std::vector<float>& logits, ThreadPool& pool);

 private:
  const Model& model_;
  int n_ctx_;
  int chunk_;
  KvArena arena_;
  std::vector<int32_t> table_;
  int n_past_ = 0;
  Batch batch_;
};

}  // namespace agentkv
