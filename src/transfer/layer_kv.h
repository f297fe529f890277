// Reading a model's K/V back out of the paged arena in a position-free form: K with each layer's
// RoPE undone (at the token's own position), V as stored. Transfer maps work on these, since a
// linear map cannot follow a rotation that depends on the position.
#pragma once

#include <cstdint>
#include <deque>
#include <span>
#include <vector>

#include "model/kv_arena.h"
#include "model/model.h"
#include "ops/rope.h"
#include "util/status.h"
#include "util/thread_pool.h"

namespace agentkv {

// One layer's un-rotated K and V, [n_tokens][kv_dim] each.
struct LayerKv {
  int64_t n_tokens = 0;
  int kv_dim = 0;
  std::vector<float> k, v;
  const float* k_row(int64_t t) const { return k.data() + t * kv_dim; }
  const float* v_row(int64_t t) const { return v.data() + t * kv_dim; }
};

// One model's RoPE tables (ops/rope.h) for positions [0, n_positions) in one direction, built the
// first time a layer asks: layers that share a Rope share a table (SmolLM2: one; Gemma 3: local and
// global).
class LayerRopeTables {
 public:
  LayerRopeTables(const ModelConfig& cfg, RopeTable::Direction direction, int64_t n_positions)
      : cfg_(cfg), direction_(direction), n_positions_(n_positions) {}
  // Not to be called by several threads at once.
  const RopeTable& layer(int il);

 private:
  const ModelConfig& cfg_;
  RopeTable::Direction direction_;
  int64_t n_positions_;
  std::deque<RopeTable> tables_;  // references stay valid as tables are added
};

// Slots [0, n_tokens) of a sequence whose block table is `table`; slot t holds position t.
std::vector<LayerKv> read_unrotated_kv(const ModelConfig& cfg, const KvArena& arena, std::span<const int32_t> table,
                                       int64_t n_tokens);
// Rows [t0, t1) of layer il into `out` (already sized); disjoint ranges may run in parallel. rope:
// layer il's unapply table covering [t0, t1) (LayerRopeTables), or null to compute the angles per row.
void read_unrotated_rows(const ModelConfig& cfg, const KvArena& arena, std::span<const int32_t> table, int il,
                         int64_t t0, int64_t t1, LayerKv& out, const RopeTable* rope = nullptr);

// Writes layer il's K (un-rotated; rotated here to position t) and V of tokens t in [t0, t1) into
// slot t. Row t - t0 of `kv` is [K | V] (2 * kv_dim floats, rows ld apart): a transfer map's output.
// rope: layer il's apply table covering [t0, t1), or null.
void write_rotated_rows(const ModelConfig& cfg, const KvArena& arena, std::span<const int32_t> table, int il,
                        int64_t t0, int64_t t1, const float* kv, int64_t ld, const RopeTable* rope = nullptr);

// Prefills `tokens` (positions 0..n-1) into a private KV manager (kv/direct_prefill.h) and reads them
// back un-rotated: the sender side of fitting, and the receiver's reference targets. `hidden` (if set)
// receives every token's residual stream after the first hidden_layer blocks, [n][n_embd] (the
// features of a receiver-conditioned map, transfer_map.h).
Result<std::vector<LayerKv>> compute_unrotated_kv(const Model& model, std::span<const int32_t> tokens, ThreadPool& pool,
                                                  std::vector<float>* hidden = nullptr, int hidden_layer = 0);

}  // namespace agentkv
