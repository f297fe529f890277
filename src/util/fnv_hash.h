// FNV-1a, 64 bit, fed incrementally: cheap integrity and identity hashes (file checksums, model
// fingerprints). Any changed byte changes the value; not meant to resist deliberate collisions.
#pragma once

#include <cstddef>
#include <cstdint>

namespace agentkv {

class Fnv1a {
 public:
  void mix(const void* p, size_t n) {
    const auto* b = static_cast<const uint8_t*>(p);
    for (size_t i = 0; i < n; ++i) h_ = (h_ ^ b[i]) * 1099511628211ull;
  }
  uint64_t value() const { return h_; }

 private:
  uint64_t h_ = 1469598103934665603ull;
};

}  // namespace agentkv
