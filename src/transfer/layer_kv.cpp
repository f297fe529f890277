#include "transfer/layer_kv.h"

#include <algorithm>

#include "ops/attention.h"

namespace agentkv {

Rope layer_rope(const ModelConfig& cfg, int il) {
  const bool gemma = cfg.arch == "gemma3";
  const bool swa = il < int(cfg.layer_is_swa.size()) && cfg.layer_is_swa[size_t(il)];
  return Rope(cfg.head_dim, cfg.n_rot, swa ? cfg.rope_base_swa : cfg.rope_base,
              gemma ? RopeStyle::kNeox : RopeStyle::kNorm);
}

std::vector<LayerKv> read_unrotated_kv(const ModelConfig& cfg, const KvArena& arena, std::span<const int32_t> table,
                                       int64_t n_tokens) {
  const int bs = arena.block_size();
  AGENTKV_CHECK(int64_t(table.size()) * bs >= n_tokens);
  std::vector<LayerKv> out(size_t(cfg.n_layer));
  for (int il = 0; il < cfg.n_layer; ++il) {
    const Rope rope = layer_rope(cfg, il);
    const PagedKvLayer layer = arena.layer(il);
    LayerKv& l = out[size_t(il)];
    l.n_tokens = n_tokens;
    l.kv_dim = cfg.kv_dim();
    l.k.resize(size_t(n_tokens * l.kv_dim));
    l.v.resize(l.k.size());
    for (int64_t t = 0; t < n_tokens; ++t) {
      const int32_t block = table[size_t(t / bs)];
      float* k = l.k.data() + t * l.kv_dim;
      kv_load(k, layer.k(block, int(t % bs)), l.kv_dim);
      kv_load(l.v.data() + t * l.kv_dim, layer.v(block, int(t % bs)), l.kv_dim);
      rope.apply(k, cfg.n_head_kv, -t);  // slot t was written at position t
    }
  }
  return out;
}

void write_rotated_kv(const ModelConfig& cfg, const KvArena& arena, std::span<const int32_t> table, int64_t slot,
                      int64_t pos, const float* k_layers, const float* v_layers) {
  const int bs = arena.block_size();
  const int kv_dim = cfg.kv_dim();
  const int32_t block = table[size_t(slot / bs)];
  std::vector<float> k(size_t(kv_dim), 0.0f);
  for (int il = 0; il < cfg.n_layer; ++il) {
    const PagedKvLayer layer = arena.layer(il);
    std::copy(k_layers + int64_t(il) * kv_dim, k_layers + int64_t(il + 1) * kv_dim, k.begin());
    layer_rope(cfg, il).apply(k.data(), cfg.n_head_kv, pos);
    kv_store(layer.k(block, int(slot % bs)), k.data(), kv_dim);
    kv_store(layer.v(block, int(slot % bs)), v_layers + int64_t(il) * kv_dim, kv_dim);
  }
}

Status prefill_slots(const Model& model, const KvArena& arena, std::span<const int32_t> table,
                     std::span<const int32_t> tokens, int64_t first, ThreadPool& pool) {
  constexpr int64_t kChunk = 256;
  const int64_t n = int64_t(tokens.size());
  std::vector<float> logits(size_t(model.config().n_vocab));
  for (int64_t c = 0; c < n; c += kChunk) {
    const int64_t end = std::min(n, c + kChunk);
    Batch batch;
    batch.seqs.push_back(SeqBlocks{table.data(), int32_t(table.size())});
    for (int64_t i = c; i < end; ++i)
      batch.add(tokens[size_t(i)], int32_t(first + i), 0, int32_t(first + i), i == end - 1);
    // Batch-invariant numerics (every token on the prefill kernels): a token's K/V must not depend
    // on how the run is split (one native BOS, a hybrid suffix, chunks), or transferred and native
    // caches would differ by more than the transfer itself.
    batch.n_tile_tokens = 0;
    AGENTKV_TRY(model.forward(batch, arena, logits.data(), pool));
  }
  return Status::ok_status();
}

}  // namespace agentkv

namespace agentkv {

Result<std::vector<LayerKv>> compute_unrotated_kv(const Model& model, std::span<const int32_t> tokens, ThreadPool& pool) {
  constexpr int kBlock = 16;
  const int64_t n = int64_t(tokens.size());
  const int64_t n_blocks = std::max<int64_t>(1, (n + kBlock - 1) / kBlock);
  KvArena arena(model.config(), kBlock, n_blocks);
  if (!arena.valid()) return make_error("compute_unrotated_kv: cannot map a KV arena for " + std::to_string(n) + " tokens");
  std::vector<int32_t> table(static_cast<size_t>(n_blocks));
  for (int64_t b = 0; b < n_blocks; ++b) table[size_t(b)] = int32_t(b);
  AGENTKV_TRY(prefill_slots(model, arena, table, tokens, 0, pool));
  return read_unrotated_kv(model.config(), arena, table, n);
}

}  // namespace agentkv
