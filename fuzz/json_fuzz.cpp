// libFuzzer target for the JSON reader that parses untrusted request bodies and tokenize input.
// Build: CC=clang CXX=clang++ cmake -S . -B build-fuzz -DAGENTKV_FUZZ=ON -DAGENTKV_TESTS=OFF
//        -DAGENTKV_SANITIZE=ON && cmake --build build-fuzz --target json_fuzz && ./build-fuzz/json_fuzz
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "util/json.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto j = agentkv::Json::parse(std::string_view(reinterpret_cast<const char*>(data), size));
  if (j.ok()) {
    // A successful parse must dump to text that parses to the same dump.
    const std::string once = j->dump();
    auto again = agentkv::Json::parse(once);
    if (!again.ok() || again->dump() != once) __builtin_trap();
  }
  return 0;
}
