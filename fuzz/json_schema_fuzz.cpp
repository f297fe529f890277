// libFuzzer target for the JSON Schema compiler (engine/json_schema_grammar, engine/regex_grammar),
// which compiles the untrusted schemas of response_format and tools: any JSON must either compile to
// a grammar that build() accepts (no empty or left-recursive rule) or be refused with a message; the
// matcher then runs over the input's bytes, and a walk that the grammar drives (bytes chosen from the
// input) must, wherever the grammar says it is complete, have written valid JSON (RFC 8259: nlohmann's
// strict accept, which checks UTF-8, surrogate escapes and number overflow like parse_json but, as the
// RFC does, lets an object repeat a key: a free-form object's keys are any strings, and no context-free
// grammar can keep them distinct, so "{}" may write {"a":1,"a":2}; parse_json refuses that on input).
// Build: see fuzz/json_fuzz.cpp; scripts/fuzz.sh json_schema_fuzz.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "engine/grammar_matcher.h"
#include "engine/json_schema_grammar.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto j = agentkv::parse_json(text, 32);
  if (!j.ok()) return 0;
  agentkv::GrammarBuilder b;
  auto root = agentkv::compile_json_schema(b, *j, "schema");
  if (!root.ok()) {
    if (root.error().empty() || root.code() != agentkv::ErrorCode::kInvalidArgument) __builtin_trap();
    return 0;
  }
  auto g = b.build(*root);
  if (!g.ok()) __builtin_trap();  // the compiler made a grammar the builder refuses

  agentkv::GrammarMatcher over_input(*g, nullptr);
  for (size_t i = 0; i < size && i < 64; ++i)
    if (!over_input.advance_bytes(text.substr(i, 1))) break;

  // Generate: at each step the first byte the grammar allows, starting from one the input picks.
  agentkv::GrammarMatcher gen(*g, nullptr);
  std::string out;
  for (size_t step = 0; step < 256; ++step) {
    if (gen.complete() && (!gen.can_continue() || (step < size && data[step] % 4 == 0))) break;
    const int start = step < size ? data[step] : 0;
    bool moved = false;
    for (int k = 0; k < 256 && !moved; ++k) {
      const char c = char((start + k) & 255);
      if (gen.advance_bytes(std::string_view(&c, 1))) {
        out += c;
        moved = true;
      }
    }
    if (!moved) {
      if (!gen.complete()) __builtin_trap();  // a dead end: the grammar allows nothing and is not done
      break;
    }
  }
  if (gen.complete() && !agentkv::Json::accept(out)) __builtin_trap();
  return 0;
}
