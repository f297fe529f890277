// Byte layout (version 1, little-endian, no padding):
//   "AGKVTIER" | u32 version | u64 fingerprint | u64 block hash | u32 dtype | u32 layout | u32 n_layer |
//   u32 n_head_kv | u32 head_dim | u32 block_size | u64 bytes per layer | u32 n_tokens |
//   i32 tokens[n_tokens] | u64 payload bytes | payload | u64 checksum
// The checksum is 64-bit FNV-1a (util/fnv_hash.h) over every byte before it: each step is a bijection
// of the state for a fixed byte, so any single changed byte changes the checksum.
#include "kv/tier_record.h"

#include <bit>
#include <cstdio>
#include <cstring>

#include "model/kv_arena.h"
#include "util/fnv_hash.h"
#include "util/hex.h"

namespace agentkv {

static_assert(std::endian::native == std::endian::little, "tier records are written in native byte order");

namespace {

constexpr char kMagic[8] = {'A', 'G', 'K', 'V', 'T', 'I', 'E', 'R'};
// Element types of K and V; the code is stored, so codes are never reused.
constexpr uint32_t kDtypeF16 = 1;
static_assert(sizeof(kv_t) == 2, "kv_t is f16: give another element type its own dtype code");

class Writer {
 public:
  template <class T>
  void put(T v) { append(&v, sizeof v); }
  void append(const void* p, size_t n) {
    const auto* b = static_cast<const uint8_t*>(p);
    out_.insert(out_.end(), b, b + n);
  }
  std::vector<uint8_t>& bytes() { return out_; }

 private:
  std::vector<uint8_t> out_;
};

// Every read is bounds-checked; the first that runs past the end fails with the field it wanted.
class Reader {
 public:
  explicit Reader(std::span<const uint8_t> b) : b_(b) {}
  Result<std::span<const uint8_t>> take(uint64_t n, const char* field) {
    if (n > b_.size() - at_)
      return make_error(ErrorCode::kDataLoss, "tier record truncated at byte " + std::to_string(b_.size()) + ": " +
                                                  field + " needs " + std::to_string(n) + " bytes at offset " +
                                                  std::to_string(at_));
    const auto s = b_.subspan(at_, size_t(n));
    at_ += size_t(n);
    return s;
  }
  template <class T>
  Result<T> get(const char* field) {
    auto s = take(sizeof(T), field);
    if (!s.ok()) return std::move(s).take_error();
    T v;
    std::memcpy(&v, s->data(), sizeof v);
    return v;
  }
  size_t offset() const { return at_; }

 private:
  std::span<const uint8_t> b_;
  size_t at_ = 0;
};

Error bad(const std::string& what) { return make_error(ErrorCode::kDataLoss, "tier record: " + what); }

uint64_t checksum(std::span<const uint8_t> bytes) {
  Fnv1a f;
  f.mix(bytes.data(), bytes.size());
  return f.value();
}

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
  Writer w;
  w.append(kMagic, sizeof kMagic);
  w.put<uint32_t>(kTierRecordVersion);
  w.put<uint64_t>(key.fingerprint);
  w.put<uint64_t>(key.block_hash);
  const TierRecordShape& s = key.shape;
  for (uint32_t v : {s.dtype, s.layout, s.n_layer, s.n_head_kv, s.head_dim, s.block_size}) w.put<uint32_t>(v);
  w.put<uint64_t>(s.bytes_per_layer);
  w.put<uint32_t>(uint32_t(key.tokens.size()));
  w.append(key.tokens.data(), key.tokens.size_bytes());
  w.put<uint64_t>(payload.size());
  w.append(payload.data(), payload.size());
  w.put<uint64_t>(checksum(w.bytes()));
  return std::move(w.bytes());
}

Result<std::span<const uint8_t>> decode_tier_record(std::span<const uint8_t> record, const TierRecordKey& key) {
  Reader r(record);
  std::span<const uint8_t> magic, tokens, payload;
  AGENTKV_ASSIGN_OR_RETURN(magic, r.take(sizeof kMagic, "the magic"));
  if (std::memcmp(magic.data(), kMagic, sizeof kMagic) != 0) return bad("bad magic (not a tier record)");
  uint32_t version = 0;
  AGENTKV_ASSIGN_OR_RETURN(version, r.get<uint32_t>("the version"));
  if (version != kTierRecordVersion)
    return bad("format version " + std::to_string(version) + ", this build reads " + std::to_string(kTierRecordVersion));
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
  const size_t summed = r.offset();
  uint64_t stored_sum = 0;
  AGENTKV_ASSIGN_OR_RETURN(stored_sum, r.get<uint64_t>("the checksum"));
  if (r.offset() != record.size())
    return bad(std::to_string(record.size() - r.offset()) + " trailing bytes after the checksum at offset " +
               std::to_string(r.offset()));
  if (checksum(record.first(summed)) != stored_sum) return bad("checksum mismatch (the record is corrupt)");
  // Intact: now whether it is the block the reader asked for, made the way the reader makes blocks.
  if (fingerprint != key.fingerprint)
    return bad("model fingerprint mismatch: record 0x" + hex64(fingerprint) + ", model 0x" + hex64(key.fingerprint));
  if (s != key.shape) return bad("shape mismatch: record has " + shape_text(s) + "; expected " + shape_text(key.shape));
  if (hash != key.block_hash)
    return bad("block hash mismatch: record 0x" + hex64(hash) + ", expected 0x" + hex64(key.block_hash));
  if (n_tokens != key.tokens.size() || (n_tokens && std::memcmp(tokens.data(), key.tokens.data(), tokens.size()) != 0))
    return bad("token mismatch: the record's " + std::to_string(n_tokens) + " token ids differ from the block's");
  if (payload_bytes != s.payload_bytes())
    return bad("payload of " + std::to_string(payload_bytes) + " bytes; the shape needs " +
               std::to_string(s.payload_bytes()));
  return payload;
}

}  // namespace agentkv
