// Reading a model's K/V back out of the paged arena in a position-free form: K with each layer's
// RoPE undone (at the token's own position), V as stored. Transfer maps work on these, since a
// linear map cannot follow a rotation that depends on the position.
#pragma once

#include <cstdint>
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

// Slots [0, n_tokens) of a sequence whose block table is `table`; slot t holds position t.
std::vector<LayerKv> read_unrotated_kv(const ModelConfig& cfg, const KvArena& arena, std::span<const int32_t> table,
                                       int64_t n_tokens);
// Rows [t0, t1) of layer il into `out` (already sized); disjoint ranges may run in parallel.
void read_unrotated_rows(const ModelConfig& cfg, const KvArena& arena, std::span<const int32_t> table, int il,
                         int64_t t0, int64_t t1, LayerKv& out);

// Writes layer il's K (un-rotated; rotated here to position t) and V of tokens t in [t0, t1) into
// slot t. Row t - t0 of `kv` is [K | V] (2 * kv_dim floats, rows ld apart): a transfer map's output.
void write_rotated_rows(const ModelConfig& cfg, const KvArena& arena, std::span<const int32_t> table, int il,
                        int64_t t0, int64_t t1, const float* kv, int64_t ld);

// Prefills `tokens` (positions 0..n-1) into a private KV manager (kv/direct_prefill.h) and reads them
// back un-rotated: the sender side of fitting, and the receiver's reference targets. `hidden` (if set)
// receives every token's residual stream after the first hidden_layer blocks, [n][n_embd] (the
// features of a receiver-conditioned map, transfer_map.h).
Result<std::vector<LayerKv>> compute_unrotated_kv(const Model& model, std::span<const int32_t> tokens, ThreadPool& pool,
                                                  std::vector<float>* hidden = nullptr, int hidden_layer = 0);

}  // namespace agentkv
