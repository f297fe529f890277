// libFuzzer target for decode_segment_index (kv/segment_index_record.h): any bytes are accepted or
// refused without UB, and an accepted record is exactly what encode_segment_index writes for the
// master and slot it gives back. The fingerprint and segment are the committed seed's
// (tests/data/tier/segment_index_v1.kvseg), so mutations of the seed reach every check past the checksum.
//   scripts/fuzz.sh segment_index_record_fuzz
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "kv/segment_index_record.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::vector<int32_t> segment{101, 102, 103, 104};
  constexpr uint64_t kFingerprint = 0x1234abcd5678ef90ULL;
  auto rec = agentkv::decode_segment_index(std::span<const uint8_t>(data, size), kFingerprint, segment);
  if (rec.ok()) {
    if (rec->end != int64_t(rec->tokens.size()) || rec->begin < 0 || rec->begin >= rec->end) __builtin_trap();
    if (!std::equal(segment.begin(), segment.end(), rec->tokens.begin() + rec->begin, rec->tokens.end())) __builtin_trap();
    const std::vector<uint8_t> again = agentkv::encode_segment_index(kFingerprint, rec->tokens, rec->begin);
    if (again.size() != size || !std::equal(again.begin(), again.end(), data)) __builtin_trap();
  }
  return 0;
}
