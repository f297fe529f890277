// The one interface every architecture implements. Weights are immutable after load, so one Model
// can serve many sequences and threads; all mutable state (KV arena, batch, scratch) is passed in.
#pragma once

#include <memory>
#include <string>

#include "model/batch.h"
#include "model/kv_arena.h"
#include "model/model_config.h"
#include "util/status.h"
#include "util/thread_pool.h"

namespace agentkv {

class GgufFile;

class Model {
 public:
  explicit Model(ModelConfig cfg) : cfg_(std::move(cfg)) {}
  virtual ~Model() = default;
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;

  const ModelConfig& config() const { return cfg_; }

  // Runs the batch: writes every token's K/V into its slot and returns logits for batch.logit_rows
  // ([logit_rows.size()][n_vocab], row-major). Validates token ids, slots and block tables first.
  Status forward(const Batch& batch, const KvArena& kv, float* logits, ThreadPool& pool) const;

 protected:
  virtual void forward_validated(const Batch& batch, const KvArena& kv, float* logits,
                                 ThreadPool& pool) const = 0;
  ModelConfig cfg_;
};

// Builds the model for the file's general.architecture ("llama", "gemma3"). The GgufFile must
// outlive the model (weights are read in place from the mapping).
Result<std::unique_ptr<Model>> create_model(const GgufFile& file);

}  // namespace agentkv
