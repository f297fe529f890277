// libFuzzer target for the OpenAI request validation that every /v1/*completions body goes through:
// any JSON must either parse into a request or give a 4xx with a message, never crash, in both the
// lenient and the --strict-api mode.
// Build: see fuzz/json_fuzz.cpp; scripts/fuzz.sh openai_request_fuzz.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "server/openai_protocol.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto j = agentkv::parse_json(std::string_view(reinterpret_cast<const char*>(data), size), 32);
  if (!j.ok()) return 0;
  for (bool strict : {false, true}) {
    agentkv::ApiLimits limits;
    limits.strict_api = strict;
    for (bool chat : {false, true}) {
      agentkv::CompletionRequest r;
      auto e = agentkv::parse_completion_request(*j, chat, limits, &r);
      if (e && (e->status < 400 || e->status > 499 || e->message.empty())) __builtin_trap();
      if (!e && r.model.empty()) __builtin_trap();
      if (!e && strict && !r.ignored_fields.empty()) __builtin_trap();  // strict refuses, never ignores
    }
  }
  return 0;
}
