// Segment index records (kv/segment_index_record.h), no model: a round trip gives the master's tokens
// and the segment's slots back; every flipped byte and every truncation is refused, and so are trailing
// bytes; a record of another model, format version or segment is refused with a message naming that
// check; and the committed version-1 record (the fuzzer's seed) still encodes byte for byte.
#include "kv/segment_index_record.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace agentkv {
namespace {

constexpr uint64_t kSegFp = 0x1234abcd5678ef90ULL;
// A master: a system prompt (5 tokens), then the segment (4 tokens) at slots [5, 9).
const std::vector<int32_t> kMaster{1, 2, 3, 4, 5, 101, 102, 103, 104};
constexpr int64_t kSegBegin = 5;
const std::vector<int32_t> kSegment{101, 102, 103, 104};
const char* const kSeedPath = "/tests/data/tier/segment_index_v1.kvseg";

std::vector<uint8_t> seg_record() { return encode_segment_index(kSegFp, kMaster, kSegBegin); }

std::string seg_error(std::span<const uint8_t> bytes, uint64_t fp = kSegFp, std::span<const int32_t> seg = kSegment) {
  auto r = decode_segment_index(bytes, fp, seg);
  if (r.ok()) return "";
  EXPECT_EQ(r.code(), ErrorCode::kDataLoss);
  return r.error();
}

TEST(SegmentIndexRecord, RoundTripGivesTheMasterBack) {
  auto r = decode_segment_index(seg_record(), kSegFp, kSegment);
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_EQ(r->tokens, kMaster);
  EXPECT_EQ(r->begin, kSegBegin);
  EXPECT_EQ(r->end, int64_t(kMaster.size()));
  // A segment at slot 0 (the master starts with it).
  auto first = decode_segment_index(encode_segment_index(kSegFp, kSegment, 0), kSegFp, kSegment);
  ASSERT_TRUE(first.ok()) << first.error();
  EXPECT_EQ(first->begin, 0);
  EXPECT_EQ(first->tokens, kSegment);
}

TEST(SegmentIndexRecord, EveryFlippedByteIsRejected) {
  const std::vector<uint8_t> rec = seg_record();
  for (size_t i = 0; i < rec.size(); ++i)
    for (uint8_t mask : {uint8_t(0x01), uint8_t(0x80), uint8_t(0xff)}) {
      std::vector<uint8_t> bad = rec;
      bad[i] ^= mask;
      EXPECT_NE(seg_error(bad), "") << "byte " << i << " ^ " << int(mask) << " was accepted";
    }
}

TEST(SegmentIndexRecord, EveryTruncationIsRejectedNamingTheByte) {
  const std::vector<uint8_t> rec = seg_record();
  for (size_t n = 0; n < rec.size(); ++n) {
    const std::string e = seg_error(std::span<const uint8_t>(rec).first(n));
    EXPECT_NE(e.find("segment index record truncated at byte " + std::to_string(n)), std::string::npos) << e;
  }
  std::vector<uint8_t> longer = rec;
  longer.push_back(0);
  EXPECT_NE(seg_error(longer).find("1 trailing bytes"), std::string::npos);
}

TEST(SegmentIndexRecord, EachCheckNamesItsProblem) {
  const std::vector<uint8_t> rec = seg_record();
  EXPECT_NE(seg_error(rec, kSegFp + 1).find("model fingerprint mismatch"), std::string::npos);
  const std::vector<int32_t> other{101, 102, 103, 105};
  EXPECT_NE(seg_error(rec, kSegFp, other).find("segment key mismatch"), std::string::npos);
  std::vector<uint8_t> v2 = rec;
  const uint32_t version = kSegmentIndexVersion + 1;
  std::memcpy(v2.data() + 8, &version, sizeof version);  // right after the magic
  EXPECT_NE(seg_error(v2).find("format version " + std::to_string(version)), std::string::npos);
  std::vector<uint8_t> not_a_record = rec;
  not_a_record[0] = 'X';
  EXPECT_NE(seg_error(not_a_record).find("bad magic"), std::string::npos);
  std::vector<uint8_t> corrupt = rec;
  corrupt[rec.size() - 12] ^= 4;  // inside the token ids
  EXPECT_NE(seg_error(corrupt).find("checksum mismatch"), std::string::npos);
  // A tier record is not a segment index record.
  std::vector<uint8_t> tier = rec;
  std::memcpy(tier.data(), "AGKVTIER", 8);
  EXPECT_NE(seg_error(tier).find("bad magic (not a segment index record)"), std::string::npos);
}

// The committed record pins format version 1: if this fails, the layout changed without a new version.
// AGENTKV_WRITE_SEEDS=1 writes it (once, when the format is new).
TEST(SegmentIndexRecord, CommittedVersionOneRecordIsStable) {
  const std::string path = std::string(AGENTKV_SOURCE_DIR) + kSeedPath;
  const std::vector<uint8_t> rec = seg_record();
  if (std::getenv("AGENTKV_WRITE_SEEDS")) {
    std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(rec.data()), std::streamsize(rec.size()));
  }
  std::ifstream f(path, std::ios::binary);
  ASSERT_TRUE(f.good()) << path;
  const std::vector<uint8_t> committed((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  EXPECT_EQ(committed, rec);
  EXPECT_TRUE(decode_segment_index(committed, kSegFp, kSegment).ok());
}

}  // namespace
}  // namespace agentkv
