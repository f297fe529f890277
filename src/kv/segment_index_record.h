// A chat-sharing segment master's index entry as a self-describing, checksummed record, what the
// Redis tier stores so another server finds a message's master (kv/segment_store.h) that only this
// server computed. It holds no KV: only the master context's token ids from 0 through the end of the
// segment and where the segment sits in them. The reader rebuilds the master by an exact prefix
// request over those tokens, which restores every full block the shared tier holds (published when
// they were computed) and computes the rest. A record that fails any check is refused with an error
// naming the check; the caller treats it as a miss and deletes it.
//
// Known limit: the record and the master's blocks travel on separate write queues, so the record may
// reach Redis before its blocks; a reader then computes more of the master itself (still exact and
// correct, only slower).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "util/status.h"

namespace agentkv {

// Bumped whenever the byte layout changes.
inline constexpr uint32_t kSegmentIndexVersion = 1;

// The content key of a segment (a message's token ids, the same at any position): SegmentStore's
// index key and the Redis key's last part.
uint64_t segment_key(std::span<const int32_t> segment);

struct SegmentIndex {
  std::vector<int32_t> tokens;  // the master context's token ids [0, end)
  int64_t begin = 0, end = 0;   // the segment's slots in them
};

// tokens: the master's token ids from 0 through the end of the segment, [begin, end) the segment
// (0 <= begin < end == tokens.size()).
std::vector<uint8_t> encode_segment_index(uint64_t fingerprint, std::span<const int32_t> tokens, int64_t begin);

// Checks every byte of `record` (a kDataLoss error naming the first failed check: bad magic, version,
// truncated at byte N, trailing bytes, checksum, fingerprint, segment key, slots, token ids) against
// the reader's model fingerprint and the segment it looks for.
Result<SegmentIndex> decode_segment_index(std::span<const uint8_t> record, uint64_t fingerprint,
                                          std::span<const int32_t> segment);

}  // namespace agentkv
