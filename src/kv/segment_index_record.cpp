// Byte layout (version 1, little-endian, no padding; util/record_bytes.h):
//   "AGKVSEGI" | u32 version | u64 fingerprint | u64 segment key | u32 begin | u32 n_tokens |
//   i32 tokens[n_tokens] | u64 checksum
// The segment is tokens [begin, n_tokens): the record ends with it.
#include "kv/segment_index_record.h"

#include <algorithm>
#include <cstring>

#include "kv/block_pool.h"
#include "util/hex.h"
#include "util/record_bytes.h"

namespace agentkv {

namespace {

constexpr char kSegmentMagic[8] = {'A', 'G', 'K', 'V', 'S', 'E', 'G', 'I'};

}  // namespace

uint64_t segment_key(std::span<const int32_t> segment) {
  // Any length: the block hash is a hash of a parent and a token run. Hits verify the ids.
  return hash_block_tokens(0x5e6d5e6d5e6d5e6dULL, segment, 0, 0);
}

std::vector<uint8_t> encode_segment_index(uint64_t fingerprint, std::span<const int32_t> tokens, int64_t begin) {
  AGENTKV_CHECK(begin >= 0 && begin < int64_t(tokens.size()) && tokens.size() <= UINT32_MAX);
  RecordWriter w(kSegmentMagic, kSegmentIndexVersion);
  w.put<uint64_t>(fingerprint);
  w.put<uint64_t>(segment_key(tokens.subspan(size_t(begin))));
  w.put<uint32_t>(uint32_t(begin));
  w.put<uint32_t>(uint32_t(tokens.size()));
  w.append(tokens.data(), tokens.size_bytes());
  return w.finish();
}

Result<SegmentIndex> decode_segment_index(std::span<const uint8_t> record, uint64_t fingerprint,
                                          std::span<const int32_t> segment) {
  RecordReader r(record, "segment index record");
  AGENTKV_TRY(r.header(kSegmentMagic, kSegmentIndexVersion));
  uint64_t fp = 0, key = 0;
  uint32_t begin = 0, n_tokens = 0;
  std::span<const uint8_t> tokens;
  AGENTKV_ASSIGN_OR_RETURN(fp, r.get<uint64_t>("the fingerprint"));
  AGENTKV_ASSIGN_OR_RETURN(key, r.get<uint64_t>("the segment key"));
  AGENTKV_ASSIGN_OR_RETURN(begin, r.get<uint32_t>("the segment's first slot"));
  AGENTKV_ASSIGN_OR_RETURN(n_tokens, r.get<uint32_t>("the token count"));
  AGENTKV_ASSIGN_OR_RETURN(tokens, r.take(uint64_t(n_tokens) * sizeof(int32_t), "the token ids"));
  AGENTKV_TRY(r.finish());
  // Intact: now whether it is the segment the reader asked for, of the reader's model.
  if (fp != fingerprint)
    return r.bad("model fingerprint mismatch: record 0x" + hex64(fp) + ", model 0x" + hex64(fingerprint));
  const uint64_t want = segment_key(segment);
  if (key != want) return r.bad("segment key mismatch: record 0x" + hex64(key) + ", expected 0x" + hex64(want));
  if (begin >= n_tokens)
    return r.bad("segment slot " + std::to_string(begin) + " is not inside the " + std::to_string(n_tokens) + " tokens");
  SegmentIndex out;
  out.tokens.resize(n_tokens);
  std::memcpy(out.tokens.data(), tokens.data(), tokens.size());
  out.begin = begin;
  out.end = n_tokens;
  if (size_t(n_tokens - begin) != segment.size() ||
      !std::equal(segment.begin(), segment.end(), out.tokens.begin() + begin))
    return r.bad("token mismatch: the record's segment [" + std::to_string(begin) + ", " + std::to_string(n_tokens) +
                 ") differs from the " + std::to_string(segment.size()) + " tokens looked up");
  return out;
}

}  // namespace agentkv
