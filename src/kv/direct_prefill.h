// Direct prefill: appending tokens to KvSequences by running the model now, outside the scheduler.
// The one implementation of "append these tokens to this sequence's KV and give me logits or hidden
// states" for everything that owns its sequences: the CLI's generate / perplexity / bench sequence
// (engine/single_sequence), kv-save, KV-PRM and text-PRM scoring, a transfer's native tokens, the
// continuation-quality comparison. The serving engine schedules its own batches instead.
// Batch-invariant by default (n_tile_tokens = 0: every token on the prefill kernels), so a token's
// K/V and logits do not depend on the chunking or on the other tokens of the pass: that is what lets
// KV-PRM scores equal text-PRM scores bit for bit, and a hybrid transfer's recomputed tokens equal
// native prefill.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "kv/kv_manager.h"
#include "model/loaded_model.h"
#include "model/model.h"
#include "util/status.h"
#include "util/thread_pool.h"

namespace agentkv {

// What a pass hands back for its rows (which tokens have rows: PrefillOptions::rows_from,
// PrefillRun::rows_from), in order. Each vector is resized to exactly the rows written.
struct RowOutputs {
  std::vector<float>* logits = nullptr;  // [rows][n_vocab]
  // The residual stream after block hidden_layer - 1 (hidden_layer in 1..n_layer), [rows][n_embd], as
  // the blocks leave it (the PRM's features normalise it: prm/step_probe.h).
  std::vector<float>* hidden = nullptr;
  int hidden_layer = 0;
  // > 0: only blocks [0, layer_end) run, for a reader that needs no deeper (no logits then). The
  // tokens' K/V in later blocks stays unwritten, so such a sequence serves only passes that stop at
  // or before layer_end too.
  int layer_end = 0;
  // The residual stream after every block, [rows][n_layer][n_embd] (the pass then runs block by
  // block, which splitting keeps bit-identical: Model::forward_layers).
  std::vector<float>* every_layer = nullptr;
};

struct PrefillOptions {
  // Batch's: 0 is batch-invariant (above); -1 picks kernels by token count, the decode kernels below
  // 4 tokens (~3x faster for such a short pass, equal up to float rounding; llama.cpp does so too).
  int64_t n_tile_tokens = 0;
  // false: the new tokens are written but not appended (forks the caller drops, verify tokens that
  // must never enter the prefix index).
  bool commit = true;
  // Which new tokens of each sequence get rows: -1 its last one; k >= 0 tokens [k, n) of its new ones.
  int64_t rows_from = -1;
  // Low-rank adapters run on the tokens that get rows only (a verifier's verify token,
  // model/batch.h); null: none. Such tokens' K/V carry the adapters: commit must be false.
  const LoraAdapters* row_adapters = nullptr;
};

// Appends tokens[i] to *seqs[i] for every i in ONE forward pass (each pass repacks the weight
// panels, so few large passes beat many small ones) and commits them. Sequences with no tokens are
// left alone (and get no rows). A pool too small is kResourceExhausted, and nothing is written.
Status prefill_together(const Model& model, KvManager& kv, std::span<KvSequence* const> seqs,
                        std::span<const std::span<const int32_t>> tokens, ThreadPool& pool,
                        const RowOutputs& out = {}, const PrefillOptions& opt = {});

// New sequences of `kv`, sequence i holding tokens[i], all written in one pass.
Result<std::vector<KvSequence>> prefill_new(const Model& model, KvManager& kv,
                                            std::span<const std::span<const int32_t>> tokens, ThreadPool& pool,
                                            const RowOutputs& out = {});

// One sequence, in passes of at most `chunk` tokens (activations scale with the pass).
inline constexpr int64_t kPrefillChunk = 512;
Status prefill_sequence(const Model& model, KvManager& kv, KvSequence& seq, std::span<const int32_t> tokens,
                        ThreadPool& pool, const RowOutputs& out = {}, const PrefillOptions& opt = {},
                        int64_t chunk = kPrefillChunk);

// A run of tokens written into slots the caller has already reserved: tokens[i] at slot (= position)
// first + i of seq. For a sequence whose slots are not filled in order (a transfer writes projected
// K/V between its native prefix and its hybrid suffix, then runs both in one pass).
struct PrefillRun {
  KvSequence* seq = nullptr;
  std::span<const int32_t> tokens;
  int64_t first = 0;
  int64_t rows_from = -1;  // as PrefillOptions::rows_from; tokens.size(): no rows
};
// Writes the runs in passes of at most `chunk` tokens in all (0: one pass), runs in order; commits
// nothing. Runs of one sequence share its block table in the pass, and each token attends to every
// slot up to its own, including those written earlier in this call.
// row_adapters as PrefillOptions'.
Status write_runs(const Model& model, std::span<const PrefillRun> runs, ThreadPool& pool, const RowOutputs& out = {},
                  int64_t n_tile_tokens = 0, int64_t chunk = 0, const LoraAdapters* row_adapters = nullptr);

// A KV manager of its own (no prefix caching) with room for n_slots token slots, for sequences
// prefilled here.
Result<std::unique_ptr<KvManager>> private_kv_manager(const ModelConfig& cfg, uint64_t fingerprint, int64_t n_slots,
                                                      int block_size);
Result<std::unique_ptr<KvManager>> private_kv_manager(const LoadedModel& lm, int64_t n_slots, int block_size);

}  // namespace agentkv
