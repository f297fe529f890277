// The one interface every architecture implements. Weights are immutable after load, so one Model
// can serve many sequences and threads; all mutable state (KV arena, batch, scratch) is passed in.
#pragma once

#include <memory>
#include <string>

#include "model/batch.h"
#include "model/kv_arena.h"
#include "model/model_config.h"
#include "ops/rope.h"
#include "util/status.h"
#include "util/thread_pool.h"

namespace agentkv {

class GgufFile;
struct DecoderWeights;

class Model {
 public:
  explicit Model(ModelConfig cfg) : cfg_(std::move(cfg)) {}
  virtual ~Model() = default;
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;

  const ModelConfig& config() const { return cfg_; }

  // Runs the batch: writes every token's K/V into its slot and returns logits for batch.logit_rows
  // ([logit_rows.size()][n_vocab], row-major). Validates token ids, slots and block tables first.
  // Same as forward_layers(batch, kv, 0, n_layer, scratch hidden, logits, pool).
  Status forward(const Batch& batch, const KvArena& kv, float* logits, ThreadPool& pool) const;

  // Runs only blocks [layer_begin, layer_end) on the batch, so a pass can stop after an early layer
  // and resume later on a subset of its tokens (selective recompute, src/share/). hidden holds the
  // residual stream, [batch.size()][n_embd], in and out: with layer_begin == 0 the tokens are embedded
  // into it first (its input is ignored), otherwise row t must hold token t's output of block
  // layer_begin - 1. Only blocks in the range write their K/V slots. With layer_end == n_layer the
  // final norm and LM head produce logits for batch.logit_rows (logits may be null when there are
  // none). Splitting a pass at any layer gives bit-identical results to running it whole.
  Status forward_layers(const Batch& batch, const KvArena& kv, int layer_begin, int layer_end, float* hidden,
                        float* logits, ThreadPool& pool) const;

  // The rotation block il applies to Q and K (architectures differ in base per layer and pair
  // layout); K is cached after it, so moving cached K to another position uses the same one.
  virtual const Rope& layer_rope(int il) const = 0;

  // The weights the forward pass runs on (model/transformer_parts.h), for a pass that must read the
  // same ones another way (the verifier's training pass).
  virtual const DecoderWeights& weights() const = 0;

 protected:
  virtual void forward_layers_validated(const Batch& batch, const KvArena& kv, int layer_begin, int layer_end,
                                        float* hidden, float* logits, ThreadPool& pool) const = 0;
  ModelConfig cfg_;
};

// Builds the model for the file's general.architecture ("llama", "gemma3"), for the context per
// sequence `opt` names (LongRoPE files pick their factors by it). The GgufFile must outlive the
// model (weights are read in place from the mapping).
Result<std::unique_ptr<Model>> create_model(const GgufFile& file, const ModelOptions& opt = {});

}  // namespace agentkv
