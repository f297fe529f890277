// One full KV block as a self-describing, checksummed record, the unit every lower tier (disk now,
// Redis later) stores: what produced it (model fingerprint, KV dtype, layout), which block it is
// (chained hash, token ids), its shape, every layer's K and V, and a checksum over all of it. A
// record that fails any check is refused with an error naming the check, so it is never used.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "util/status.h"

namespace agentkv {

class KvArena;

// Bumped whenever the byte layout below changes.
inline constexpr uint32_t kTierRecordVersion = 1;

// The geometry of a block's payload. The model fingerprint does not cover what this build does with
// the values (the KV element type and the arena's layout), so records carry both and decode checks
// them against the reader's.
struct TierRecordShape {
  uint32_t dtype = 0;           // kv_dtype_code(): the element type of K and V
  uint32_t layout = 0;          // kKvLayoutVersion: [layer][K | V][block_size][kv_dim]
  uint32_t n_layer = 0;
  uint32_t n_head_kv = 0;
  uint32_t head_dim = 0;
  uint32_t block_size = 0;
  uint64_t bytes_per_layer = 0;  // K and V of one layer for block_size tokens

  uint64_t payload_bytes() const { return uint64_t(n_layer) * bytes_per_layer; }
  bool operator==(const TierRecordShape&) const = default;
};

// The shape of blocks in `arena` for a model with n_head_kv heads of head_dim.
TierRecordShape tier_shape_of(const KvArena& arena, int n_head_kv, int head_dim);

// What the reader expects a record to be: a miss on any field refuses the record.
struct TierRecordKey {
  uint64_t fingerprint = 0;
  uint64_t block_hash = 0;
  std::span<const int32_t> tokens;
  TierRecordShape shape;
};

std::vector<uint8_t> encode_tier_record(const TierRecordKey& key, std::span<const uint8_t> payload);

// Checks every byte of `record` against `key` (a kDataLoss error naming the first failed check: bad
// magic, version, truncated at byte N, trailing bytes, checksum, fingerprint, dtype or shape, block
// hash, token ids) and returns the payload, a view into `record`.
Result<std::span<const uint8_t>> decode_tier_record(std::span<const uint8_t> record, const TierRecordKey& key);

}  // namespace agentkv
