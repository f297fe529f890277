// Byte layout (version 1, little-endian, no padding):
//   "AGKVTIER" | u32 version | u64 fingerprint | u64 block hash | u32 dtype | u32 layout | u32 n_layer |
//   u32 n_head_kv | u32 head_dim | u32 block_size | u64 bytes per layer | u32 n_tokens |
//   i32 tokens[n_tokens] | u64 payload bytes | payload | u64 checksum
// The checksum is 64-bit FNV-1a (util/record_bytes.h) over every byte before it: each step is a
// bijection of the state for a fixed byte, so any single changed byte changes the checksum.
#include "kv/tier_record.h"

#include "model/kv_arena.h"
#include "util/hex.h"
#include "util/record_bytes.h"

namespace agentkv {

namespace {

constexpr char kTierMagic[8] = {'A', 'G', 'K', 'V', 'T', 'I', 'E', 'R'};
// Element types of K and V; the code is stored, so codes are never reused.
constexpr uint32_t kDtypeF16 = 1;
static_assert(sizeof(kv_t) == 2, "kv_t is f16: give another element type its own dtype code");

std::string shape_text(const TierRecordShape& s) {
  return "dtype " + std::to_string(s.dtype) + ", layout " + std::to_string(s.layout) + ", " +
         std::to_string(s.n_layer) + " layers x " + std::to_string(s.n_head_kv) + " kv heads x " +
         std::to_string(s.head_dim) + " dims, " + std::to_string(s.block_size) + " tokens, " +
         std::to_string(s.bytes_per_layer) + " bytes per layer";
}

}  // namespace

TierRecordShape tier_shape_of(const KvArena& arena, int n_head_kv, int head_dim) {
  TierRecordShape s;
  s.dtype = kDtypeF16;
  s.layout = KvArena::kLayoutVersion;
  s.n_layer = uint32_t(arena.n_layer());
  s.n_head_kv = uint32_t(n_head_kv);
  s.head_dim = uint32_t(head_dim);
  s.block_size = uint32_t(arena.block_size());
  s.bytes_per_layer = uint64_t(arena.bytes_per_block()) / uint64_t(arena.n_layer());
  return s;
}

std::vector<uint8_t> encode_tier_record(const TierRecordKey& key, std::span<const uint8_t> payload) {
  RecordWriter w(kTierMagic, kTierRecordVersion);
  w.put<uint64_t>(key.fingerprint);
  w.put<uint64_t>(key.block_hash);
  const TierRecordShape& s = key.shape;
  for (uint32_t v : {s.dtype, s.layout, s.n_layer, s.n_head_kv, s.head_dim, s.block_size}) w.put<uint32_t>(v);
  w.put<uint64_t>(s.bytes_per_layer);
  w.put<uint32_t>(uint32_t(key.tokens.size()));
  w.append(key.tokens.data(), key.tokens.size_bytes());
  w.put<uint64_t>(payload.size());
  w.append(payload.data(), payload.size());
  return w.finish();
}

Result<std::span<const uint8_t>> decode_tier_record(std::span<const uint8_t> record, const TierRecordKey& key) {
  RecordReader r(record, "tier record");
  AGENTKV_TRY(r.header(kTierMagic, kTierRecordVersion));
  std::span<const uint8_t> tokens, payload;
  uint64_t fingerprint = 0, hash = 0;
  AGENTKV_ASSIGN_OR_RETURN(fingerprint, r.get<uint64_t>("the fingerprint"));
  AGENTKV_ASSIGN_OR_RETURN(hash, r.get<uint64_t>("the block hash"));
  TierRecordShape s;
  for (uint32_t* f : {&s.dtype, &s.layout, &s.n_layer, &s.n_head_kv, &s.head_dim, &s.block_size})
    AGENTKV_ASSIGN_OR_RETURN(*f, r.get<uint32_t>("the shape"));
  AGENTKV_ASSIGN_OR_RETURN(s.bytes_per_layer, r.get<uint64_t>("the shape"));
  uint32_t n_tokens = 0;
  AGENTKV_ASSIGN_OR_RETURN(n_tokens, r.get<uint32_t>("the token count"));
  AGENTKV_ASSIGN_OR_RETURN(tokens, r.take(uint64_t(n_tokens) * sizeof(int32_t), "the token ids"));
  uint64_t payload_bytes = 0;
  AGENTKV_ASSIGN_OR_RETURN(payload_bytes, r.get<uint64_t>("the payload size"));
  AGENTKV_ASSIGN_OR_RETURN(payload, r.take(payload_bytes, "the payload"));
  AGENTKV_TRY(r.finish());
  // Intact: now whether it is the block the reader asked for, made the way the reader makes blocks.
  if (fingerprint != key.fingerprint)
    return r.bad("model fingerprint mismatch: record 0x" + hex64(fingerprint) + ", model 0x" + hex64(key.fingerprint));
  if (s != key.shape) return r.bad("shape mismatch: record has " + shape_text(s) + "; expected " + shape_text(key.shape));
  if (hash != key.block_hash)
    return r.bad("block hash mismatch: record 0x" + hex64(hash) + ", expected 0x" + hex64(key.block_hash));
  if (n_tokens != key.tokens.size() || (n_tokens && std::memcmp(tokens.data(), key.tokens.data(), tokens.size()) != 0))
    return r.bad("token mismatch: the record's " + std::to_string(n_tokens) + " token ids differ from the block's");
  if (payload_bytes != s.payload_bytes())
    return r.bad("payload of " + std::to_string(payload_bytes) + " bytes; the shape needs " +
               std::to_string(s.payload_bytes()));
  return payload;
}

}  // namespace agentkv
