// Tier records (kv/tier_record.h) with the tiny geometry, no model: a round trip gives the payload
// back; every flipped byte, every truncation and trailing bytes are refused; a record of another
// model, format version, block or token run is refused with a message naming that check; and the
// committed version-1 record (also the fuzzer's seed) still encodes byte for byte.
#include "kv/tier_record.h"

#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <iterator>
#include <numeric>
#include <vector>

#include "model/kv_arena.h"
#include "tiny_kv_config.h"

namespace agentkv {
namespace {

constexpr uint64_t kRecordFp = 0x1234abcd5678ef90ULL;
constexpr uint64_t kHash = 0x0f1e2d3c4b5a6978ULL;

TierRecordShape record_shape() {
  const ModelConfig c = testing_kv::tiny_config();
  KvArena arena(c, 4, 1);
  return tier_shape_of(arena, c.n_head_kv, c.head_dim);
}

struct Block {
  std::vector<int32_t> tokens{101, 102, 103, 104};
  std::vector<uint8_t> payload;
  Block() {
    payload.resize(size_t(testing_kv::kTinyBlockBytes4));
    std::iota(payload.begin(), payload.end(), uint8_t(7));
  }
  TierRecordKey key() const { return TierRecordKey{kRecordFp, kHash, tokens, record_shape()}; }
  std::vector<uint8_t> record() const { return encode_tier_record(key(), payload); }
};

std::string decode_error(std::span<const uint8_t> bytes, const TierRecordKey& key) {
  auto r = decode_tier_record(bytes, key);
  if (r.ok()) return "";
  EXPECT_EQ(r.code(), ErrorCode::kDataLoss);
  return r.error();
}

TEST(TierRecord, ShapeOfTheTinyArena) {
  const TierRecordShape s = record_shape();
  EXPECT_EQ(s.n_layer, 2u);
  EXPECT_EQ(s.n_head_kv, 1u);
  EXPECT_EQ(s.head_dim, 4u);
  EXPECT_EQ(s.block_size, 4u);
  EXPECT_EQ(s.layout, KvArena::kLayoutVersion);
  EXPECT_EQ(int64_t(s.payload_bytes()), testing_kv::kTinyBlockBytes4);
}

TEST(TierRecord, RoundTripGivesThePayloadBack) {
  const Block b;
  const std::vector<uint8_t> rec = b.record();
  auto payload = decode_tier_record(rec, b.key());
  ASSERT_TRUE(payload.ok()) << payload.error();
  EXPECT_EQ(std::vector<uint8_t>(payload->begin(), payload->end()), b.payload);
}

TEST(TierRecord, EveryFlippedByteIsRejected) {
  const Block b;
  const std::vector<uint8_t> rec = b.record();
  for (size_t i = 0; i < rec.size(); ++i)
    for (uint8_t mask : {uint8_t(0x01), uint8_t(0x80), uint8_t(0xff)}) {
      std::vector<uint8_t> bad = rec;
      bad[i] ^= mask;
      EXPECT_NE(decode_error(bad, b.key()), "") << "byte " << i << " ^ " << int(mask) << " was accepted";
    }
}

TEST(TierRecord, EveryTruncationIsRejectedNamingTheByte) {
  const Block b;
  const std::vector<uint8_t> rec = b.record();
  for (size_t n = 0; n < rec.size(); ++n) {
    const std::string e = decode_error(std::span<const uint8_t>(rec).first(n), b.key());
    EXPECT_NE(e.find("truncated at byte " + std::to_string(n) + ":"), std::string::npos) << n << ": " << e;
  }
}

TEST(TierRecord, TrailingBytesAreRejected) {
  const Block b;
  std::vector<uint8_t> rec = b.record();
  rec.push_back(0);
  EXPECT_NE(decode_error(rec, b.key()).find("1 trailing bytes"), std::string::npos);
}

TEST(TierRecord, RejectsAnotherModelVersionBlockOrTokens) {
  const Block b;
  const std::vector<uint8_t> rec = b.record();
  TierRecordKey k = b.key();
  k.fingerprint ^= 1;
  EXPECT_NE(decode_error(rec, k).find("model fingerprint mismatch"), std::string::npos);
  k = b.key();
  k.block_hash ^= 1;
  EXPECT_NE(decode_error(rec, k).find("block hash mismatch"), std::string::npos);
  const std::vector<int32_t> other{101, 102, 103, 105};
  k = b.key();
  k.tokens = other;
  EXPECT_NE(decode_error(rec, k).find("token mismatch"), std::string::npos);
  k = b.key();
  k.shape.dtype += 1;  // another KV element type
  EXPECT_NE(decode_error(rec, k).find("shape mismatch"), std::string::npos);
  k = b.key();
  k.shape.layout += 1;  // another arena layout
  EXPECT_NE(decode_error(rec, k).find("shape mismatch"), std::string::npos);

  std::vector<uint8_t> v2 = rec;
  const uint32_t version = kTierRecordVersion + 1;
  std::memcpy(v2.data() + 8, &version, sizeof version);  // right after the magic
  EXPECT_NE(decode_error(v2, b.key()).find("format version " + std::to_string(version)), std::string::npos);
  std::vector<uint8_t> not_a_record = rec;
  not_a_record[0] = 'X';
  EXPECT_NE(decode_error(not_a_record, b.key()).find("bad magic"), std::string::npos);
  std::vector<uint8_t> corrupt = rec;
  corrupt[rec.size() / 2] ^= 4;  // inside the payload
  EXPECT_NE(decode_error(corrupt, b.key()).find("checksum mismatch"), std::string::npos);
}

// The committed record pins format version 1: if this fails, the layout changed without a new version.
TEST(TierRecord, CommittedVersionOneRecordIsStable) {
  std::ifstream f(std::string(AGENTKV_SOURCE_DIR) + "/tests/data/tier/tiny_block_v1.kvblock", std::ios::binary);
  ASSERT_TRUE(f.good());
  const std::vector<uint8_t> committed((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  const Block b;
  EXPECT_EQ(committed, b.record());
  EXPECT_TRUE(decode_tier_record(committed, b.key()).ok());
}

}  // namespace
}  // namespace agentkv
