// libFuzzer target for decode_tier_record (kv/tier_record.h): any bytes are accepted or refused
// without UB, and an accepted record is exactly what encode_tier_record writes for its payload.
// The key is the committed seed's (tests/data/tier/tiny_block_v1.kvblock), so mutations of the seed
// reach every check past the checksum.
//   scripts/fuzz.sh tier_record_fuzz
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "kv/tier_record.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::vector<int32_t> tokens{101, 102, 103, 104};
  // The tiny geometry of tests/unit/tiny_kv_config.h: 2 layers, 1 KV head of 4, blocks of 4 tokens.
  static const agentkv::TierRecordShape shape{
      .dtype = 1, .layout = 1, .n_layer = 2, .n_head_kv = 1, .head_dim = 4, .block_size = 4, .bytes_per_layer = 64};
  const agentkv::TierRecordKey key{0x1234abcd5678ef90ULL, 0x0f1e2d3c4b5a6978ULL, tokens, shape};
  const std::span<const uint8_t> bytes(data, size);
  auto payload = agentkv::decode_tier_record(bytes, key);
  if (payload.ok()) {
    if (payload->size() != shape.payload_bytes()) __builtin_trap();
    const std::vector<uint8_t> again = agentkv::encode_tier_record(key, *payload);
    if (again.size() != size || !std::equal(again.begin(), again.end(), data)) __builtin_trap();
  }
  return 0;
}
