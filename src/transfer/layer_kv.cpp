#include "transfer/layer_kv.h"

#include <algorithm>
#include <optional>

#include "kv/direct_prefill.h"
#include "ops/attention.h"

namespace agentkv {

const RopeTable& LayerRopeTables::layer(int il) {
  const Rope rope = layer_rope(cfg_, il);
  for (const RopeTable& t : tables_)
    if (t.rope() == rope) return t;
  return tables_.emplace_back(rope, direction_, n_positions_);
}

namespace {
void check_table(const RopeTable* rope, RopeTable::Direction direction, int64_t t1) {
  AGENTKV_CHECK(!rope || (rope->direction() == direction && rope->n_positions() >= t1));
}
}  // namespace

void read_unrotated_rows(const ModelConfig& cfg, const KvArena& arena, std::span<const int32_t> table, int il,
                         int64_t t0, int64_t t1, LayerKv& out, const RopeTable* rope_table) {
  const int bs = arena.block_size();
  AGENTKV_CHECK(int64_t(table.size()) * bs >= t1 && out.n_tokens >= t1);
  check_table(rope_table, RopeTable::Direction::kUnapply, t1);
  // The layer's Rope only when no table carries its angles (building one allocates).
  const std::optional<Rope> rope = rope_table ? std::nullopt : std::optional<Rope>(layer_rope(cfg, il));
  const PagedKvLayer layer = arena.layer(il);
  for (int64_t t = t0; t < t1; ++t) {
    const int32_t block = table[size_t(t / bs)];
    float* k = out.k.data() + t * out.kv_dim;
    kv_load(k, layer.k(block, int(t % bs)), out.kv_dim);
    kv_load(out.v.data() + t * out.kv_dim, layer.v(block, int(t % bs)), out.kv_dim);
    // Slot t was written at position t.
    if (rope_table)
      rope_table->rotate(k, cfg.n_head_kv, t);
    else
      rope->unapply(k, cfg.n_head_kv, t);
  }
}

std::vector<LayerKv> read_unrotated_kv(const ModelConfig& cfg, const KvArena& arena, std::span<const int32_t> table,
                                       int64_t n_tokens) {
  std::vector<LayerKv> out(size_t(cfg.n_layer));
  for (int il = 0; il < cfg.n_layer; ++il) {
    LayerKv& l = out[size_t(il)];
    l.n_tokens = n_tokens;
    l.kv_dim = cfg.kv_dim();
    l.k.resize(size_t(n_tokens * l.kv_dim));
    l.v.resize(l.k.size());
    read_unrotated_rows(cfg, arena, table, il, 0, n_tokens, l);
  }
  return out;
}

void write_rotated_rows(const ModelConfig& cfg, const KvArena& arena, std::span<const int32_t> table, int il,
                        int64_t t0, int64_t t1, const float* kv, int64_t ld, const RopeTable* rope_table) {
  const int bs = arena.block_size();
  const int kv_dim = cfg.kv_dim();
  AGENTKV_CHECK(int64_t(table.size()) * bs >= t1);
  check_table(rope_table, RopeTable::Direction::kApply, t1);
  // The layer's Rope only when no table carries its angles (building one allocates).
  const std::optional<Rope> rope = rope_table ? std::nullopt : std::optional<Rope>(layer_rope(cfg, il));
  const PagedKvLayer layer = arena.layer(il);
  std::vector<float> k(static_cast<size_t>(kv_dim));
  for (int64_t t = t0; t < t1; ++t) {
    const float* row = kv + (t - t0) * ld;
    const int32_t block = table[size_t(t / bs)];
    std::copy(row, row + kv_dim, k.begin());
    if (rope_table)
      rope_table->rotate(k.data(), cfg.n_head_kv, t);
    else
      rope->apply(k.data(), cfg.n_head_kv, t);
    kv_store(layer.k(block, int(t % bs)), k.data(), kv_dim);
    kv_store(layer.v(block, int(t % bs)), row + kv_dim, kv_dim);
  }
}

Result<std::vector<LayerKv>> compute_unrotated_kv(const Model& model, std::span<const int32_t> tokens, ThreadPool& pool,
                                                  std::vector<float>* hidden, int hidden_layer) {
  constexpr int kBlock = 16;
  const int64_t n = int64_t(tokens.size());
  std::unique_ptr<KvManager> kv;
  AGENTKV_ASSIGN_OR_RETURN(kv, private_kv_manager(model.config(), 0, n, kBlock));
  KvSequence seq(*kv);
  RowOutputs out;
  PrefillOptions opt;
  if (hidden) {
    out.hidden = hidden;
    out.hidden_layer = hidden_layer;
    opt.rows_from = 0;  // every token's row
  }
  if (n > 0) AGENTKV_TRY(prefill_sequence(model, *kv, seq, tokens, pool, out, opt));
  return read_unrotated_kv(model.config(), kv->arena(), seq.blocks(), n);
}

}  // namespace agentkv
