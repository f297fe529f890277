#include "model/kv_rerotate.h"

#include <algorithm>
#include <cstring>
#include <unordered_map>
#include <vector>

namespace agentkv {

Status validate_slot_range(const KvSlotRange& r, int32_t n, const KvArena& kv, const std::string& what) {
  if (n < 0) return make_error(what + ": negative token count");
  if (r.slot0 < 0 || int64_t(r.slot0) + n > int64_t(r.blocks.n_blocks) * kv.block_size())
    return make_error(what + " slots [" + std::to_string(r.slot0) + ", " +
                      std::to_string(int64_t(r.slot0) + n) + ") outside its " + std::to_string(r.blocks.n_blocks) +
                      " blocks");
  if (n == 0) return {};
  const int bs = kv.block_size();
  for (int32_t j = r.slot0 / bs; j <= (r.slot0 + n - 1) / bs; ++j)
    if (r.blocks.table[j] < 0 || r.blocks.table[j] >= kv.n_blocks())
      return make_error(what + " block id " + std::to_string(r.blocks.table[j]) + " outside the arena");
  return {};
}

Status rerotate_kv(const Model& model, const KvArena& kv, const KvSlotRange& src, const KvSlotRange& dst, int32_t n,
                   int32_t delta, int layer_begin, int layer_end, ThreadPool& pool) {
  const ModelConfig& c = model.config();
  if (kv.n_layer() != c.n_layer || kv.kv_dim() != c.kv_dim())
    return make_error("rerotate_kv: KV arena was made for another model geometry");
  if (layer_begin < 0 || layer_begin > layer_end || layer_end > c.n_layer)
    return make_error("rerotate_kv: layer range [" + std::to_string(layer_begin) + ", " + std::to_string(layer_end) +
                      ") outside [0, " + std::to_string(c.n_layer) + ")");
  AGENTKV_TRY(validate_slot_range(src, n, kv, "rerotate_kv: source"));
  AGENTKV_TRY(validate_slot_range(dst, n, kv, "rerotate_kv: destination"));
  const int bs = kv.block_size();
  // Overlap check on physical slots: slot i may be rewritten in place, but a destination slot that is
  // another token's source would be read after it was overwritten (or before, depending on threads).
  std::unordered_map<int64_t, int32_t> src_at;
  src_at.reserve(size_t(n));
  for (int32_t i = 0; i < n; ++i) {
    const PhysicalSlot p = physical_slot(src, i, bs);
    src_at.emplace(int64_t(p.block) * bs + p.offset, i);
  }
  for (int32_t i = 0; i < n; ++i) {
    const PhysicalSlot p = physical_slot(dst, i, bs);
    const auto it = src_at.find(int64_t(p.block) * bs + p.offset);
    if (it != src_at.end() && it->second != i)
      return make_error("rerotate_kv: destination slot " + std::to_string(dst.slot0 + i) +
                        " overlaps source slot " + std::to_string(src.slot0 + it->second));
  }
  const int kvd = c.kv_dim();
  // Every row of a layer moves by the same delta: its cos and sin computed once per layer (the floats
  // Rope::shift computes at each call, so the rows come out bit for bit as shifting each would).
  int half = 0;
  for (int il = layer_begin; il < layer_end; ++il) half = std::max(half, model.layer_rope(il).n_rot() / 2);
  std::vector<float> cs, sn;
  if (delta != 0) {
    cs.resize(size_t(layer_end - layer_begin) * size_t(half));
    sn.resize(cs.size());
    for (int il = layer_begin; il < layer_end; ++il) {
      const size_t at = size_t(il - layer_begin) * size_t(half);
      model.layer_rope(il).angles(delta, 1.0f, cs.data() + at, sn.data() + at);
    }
  }
  pool.parallel_for(n, 4, [&](int64_t i0, int64_t i1) {
    std::vector<float> row(static_cast<size_t>(kvd));
    for (int64_t i = i0; i < i1; ++i) {
      const PhysicalSlot s = physical_slot(src, int32_t(i), bs), d = physical_slot(dst, int32_t(i), bs);
      for (int il = layer_begin; il < layer_end; ++il) {
        const PagedKvLayer l = kv.layer(il);
        if (delta == 0) {
          std::memmove(l.k(d.block, d.offset), l.k(s.block, s.offset), size_t(kvd) * sizeof(kv_t));
        } else {
          kv_load(row.data(), l.k(s.block, s.offset), kvd);
          const size_t at = size_t(il - layer_begin) * size_t(half);
          model.layer_rope(il).rotate_by(row.data(), c.n_head_kv, cs.data() + at, sn.data() + at);
          kv_store(l.k(d.block, d.offset), row.data(), kvd);
        }
        std::memmove(l.v(d.block, d.offset), l.v(s.block, s.offset), size_t(kvd) * sizeof(kv_t));
      }
    }
  });
  return {};
}

}  // namespace agentkv
