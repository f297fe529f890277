// libFuzzer target for parse_byte_size (the --kv-mem style budget text): any input is accepted or
// rejected without UB, an accepted size is non-negative, and its decimal form parses to itself.
//   scripts/fuzz.sh byte_size_fuzz
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "kv/kv_manager.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto r = agentkv::parse_byte_size(std::string_view(reinterpret_cast<const char*>(data), size));
  if (r.ok()) {
    if (*r < 0) __builtin_trap();
    auto again = agentkv::parse_byte_size(std::to_string(*r));
    if (!again.ok() || *again != *r) __builtin_trap();
  }
  return 0;
}
