// Moving cached K/V to other positions. K is cached after RoPE, and rotations compose, so K computed
// at position p becomes K at p + delta by one more rotation of delta (each layer with its own base
// and pair layout, Model::layer_rope); V carries no position and is copied as is. The only error
// is float rounding: one extra f16 rounding of K and the f32 rotation itself.
#pragma once

#include <cstdint>
#include <string>

#include "model/batch.h"
#include "model/kv_arena.h"
#include "model/model.h"
#include "util/status.h"
#include "util/thread_pool.h"

namespace agentkv {

// Slots [slot0, slot0 + n) of one sequence: slot s lives in blocks.table[s / block_size] at offset
// s % block_size, so a range may start anywhere inside a block.
struct KvSlotRange {
  SeqBlocks blocks;
  int32_t slot0 = 0;
};

// The arena block and in-block offset of slot i of a range (the range must hold it).
struct PhysicalSlot {
  int32_t block;
  int offset;
};
inline PhysicalSlot physical_slot(const KvSlotRange& r, int64_t i, int block_size) {
  const int64_t s = r.slot0 + i;
  return {r.blocks.table[s / block_size], int(s % block_size)};
}

// OK when slots [r.slot0, r.slot0 + n) lie inside the range's blocks and those blocks inside the
// arena; otherwise an error naming `what` ("source", "agent 3", ...).
Status validate_slot_range(const KvSlotRange& r, int32_t n, const KvArena& kv, const std::string& what);

// For layers [layer_begin, layer_end) and i in [0, n): K of dst slot i = K of src slot i rotated by
// delta positions, V of dst slot i = V of src slot i. Source and destination live in the same arena
// (e.g. a master copy's blocks and an agent's blocks); they may be the very same slots (an in-place
// move), but must not otherwise overlap, since a slot would be read after it was overwritten.
// Errors name bad slots, blocks, layers or overlap; nothing is written then.
Status rerotate_kv(const Model& model, const KvArena& kv, const KvSlotRange& src, const KvSlotRange& dst, int32_t n,
                   int32_t delta, int layer_begin, int layer_end, ThreadPool& pool);

// All layers.
inline Status rerotate_kv(const Model& model, const KvArena& kv, const KvSlotRange& src, const KvSlotRange& dst,
                          int32_t n, int32_t delta, ThreadPool& pool) {
  return rerotate_kv(model, kv, src, dst, n, delta, 0, model.config().n_layer, pool);
}

}  // namespace agentkv
