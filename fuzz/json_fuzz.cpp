// libFuzzer target for parse_json (nlohmann's parser under our depth and key bounds), which parses untrusted request bodies and tokenize input.
// Build: CC=clang CXX=clang++ cmake -S . -B build-fuzz -DAGENTKV_FUZZ=ON -DAGENTKV_TESTS=OFF
//        -DAGENTKV_SANITIZE=ON && cmake --build build-fuzz --target json_fuzz && ./build-fuzz/json_fuzz
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "util/json.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto j = agentkv::parse_json(std::string_view(reinterpret_cast<const char*>(data), size));
  if (j.ok()) {
    // A successful parse must dump to text that parses to the same dump.
    const std::string once = agentkv::dump_json(*j);
    auto again = agentkv::parse_json(once);
    if (!again.ok() || agentkv::dump_json(*again) != once) __builtin_trap();
  }
  return 0;
}
