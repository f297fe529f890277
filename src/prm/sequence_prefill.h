// Appending tokens to KvSequences with the prefill kernels: the one way the PRM code writes K/V.
// Batch-invariant mode with every token in the packed-panel group, so a token's K/V and logits do
// not depend on the chunking or on the other tokens of the pass. The KV-PRM's contexts and the
// text PRM's re-encoded trajectories both come from here, which is what lets their scores agree bit
// for bit.
#pragma once

#include <span>
#include <vector>

#include "kv/kv_manager.h"
#include "model/model.h"

namespace agentkv::prm {

// What a pass hands back for the rows in batch.logit_rows, in order. feature_layer in 1..n_layer
// picks the block whose output becomes the features (step_probe.h); 0: no features.
struct RowOutputs {
  std::vector<float>* logits = nullptr;    // [rows][n_vocab]
  std::vector<float>* features = nullptr;  // [rows][n_embd], RMS-normalised residual stream
  int feature_layer = 0;
  // > 0: only blocks [0, layer_end) run, for a verifier that reads no deeper (no logits then). The
  // tokens' K/V in later blocks stays unwritten, so such a sequence serves only passes that stop
  // at or before layer_end too.
  int layer_end = 0;
  // fit-prm's layer sweep: the features after every block, [rows][n_layer][n_embd] (the pass then
  // runs block by block, which splitting keeps bit-identical).
  std::vector<float>* every_layer = nullptr;
};

// One forward over the batch. The pass is split after block feature_layer - 1 to read the residual
// stream there; a split pass is bit-identical to a whole one (Model::forward_layers).
Status forward_rows(const Model& model, const Batch& batch, const KvArena& arena, ThreadPool& pool,
                    const RowOutputs& out);

// Appends tokens[i] to *seqs[i] for every i in ONE forward pass (each pass repacks the weight
// panels, so few large passes beat many small ones) and commits them. With last_logits, returns the
// logits of each sequence's last new token, in order (seqs.size() * n_vocab floats). Sequences with
// no tokens are left alone (and get no logits row).
Status prefill_together(const Model& model, KvManager& kv, std::span<KvSequence* const> seqs,
                        std::span<const std::span<const int32_t>> tokens, ThreadPool& pool,
                        std::vector<float>* last_logits = nullptr);
// The same, with features as well as logits of each sequence's last new token.
Status prefill_together(const Model& model, KvManager& kv, std::span<KvSequence* const> seqs,
                        std::span<const std::span<const int32_t>> tokens, ThreadPool& pool, const RowOutputs& out);

// New sequences of `kv`, sequence i holding tokens[i], all written in one pass.
Result<std::vector<KvSequence>> prefill_new(const Model& model, KvManager& kv,
                                            std::span<const std::span<const int32_t>> tokens, ThreadPool& pool,
                                            const RowOutputs& out = {});

// One sequence, in chunks of at most `chunk` tokens (activations scale with the pass).
Status prefill_sequence(const Model& model, KvManager& kv, KvSequence& seq, std::span<const int32_t> tokens,
                        ThreadPool& pool, std::vector<float>* last_logits = nullptr, int chunk = 512);
Status prefill_sequence(const Model& model, KvManager& kv, KvSequence& seq, std::span<const int32_t> tokens,
                        ThreadPool& pool, const RowOutputs& out, int chunk = 512);

}  // namespace agentkv::prm
