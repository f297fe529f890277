// libFuzzer target for the HTTP/1.1 request parser, which reads untrusted bytes straight off the socket.
// The first two input bytes seed how the rest is split into feed() calls; the parse must not depend
// on the split: the same requests and the same error come out as when the bytes arrive in one piece.
// Build: CC=clang CXX=clang++ cmake -S . -B build-fuzz -DAGENTKV_FUZZ=ON -DAGENTKV_TESTS=OFF
//        -DAGENTKV_SANITIZE=ON && cmake --build build-fuzz --target http_request_fuzz
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "server/http_parser.h"

namespace {

struct Outcome {
  std::vector<agentkv::HttpRequest> requests;
  agentkv::HttpError error;
  bool mid_request = false;
};

bool same(const agentkv::HttpRequest& a, const agentkv::HttpRequest& b) {
  return a.method == b.method && a.target == b.target && a.path == b.path && a.query == b.query &&
         a.version_minor == b.version_minor && a.keep_alive == b.keep_alive && a.headers == b.headers &&
         a.body == b.body;
}

template <class NextSize>
Outcome parse(std::string_view input, const agentkv::HttpLimits& limits, NextSize next_size) {
  agentkv::HttpParser p(limits);
  Outcome out;
  while (!input.empty()) {
    const size_t n = std::min(input.size(), next_size());
    p.feed(input.substr(0, n));
    input.remove_prefix(n);
    while (auto r = p.next_request()) out.requests.push_back(std::move(*r));
  }
  out.error = p.error();
  out.mid_request = p.mid_request();
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  uint32_t state = data[0] | (uint32_t{data[1]} << 8);
  const std::string_view input(reinterpret_cast<const char*>(data + 2), size - 2);
  // Small limits so the 413 / 431 paths are reachable from short inputs.
  agentkv::HttpLimits limits;
  limits.max_header_bytes = 512;
  limits.max_headers = 8;
  limits.max_body_bytes = 256;

  const Outcome whole = parse(input, limits, [&] { return input.size(); });
  const Outcome split = parse(input, limits, [&] {
    state = state * 1103515245u + 12345u;
    return size_t{1} + (state >> 16) % 64;
  });
  if (whole.requests.size() != split.requests.size()) __builtin_trap();
  for (size_t i = 0; i < whole.requests.size(); ++i) {
    if (!same(whole.requests[i], split.requests[i])) __builtin_trap();
    const agentkv::HttpRequest& r = whole.requests[i];
    if (r.body.size() > limits.max_body_bytes || r.headers.size() > limits.max_headers) __builtin_trap();
  }
  // 431 for an over-long head may come earlier with more bytes; the status class must still agree.
  if (whole.error.status != split.error.status || whole.mid_request != split.mid_request) __builtin_trap();
  if (whole.error.status != 0 && whole.error.message.empty()) __builtin_trap();
  return 0;
}
