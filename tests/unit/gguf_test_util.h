// Synthetic GGUF files for the gguf unit tests, and helpers to corrupt one field of them in place.
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "gguf/ggml_types.h"
#include "gguf/gguf_writer.h"

namespace agentkv::gguf_test {

using Bytes = std::vector<uint8_t>;

inline Bytes filled(size_t n, uint8_t seed) {
  Bytes b(n);
  for (size_t k = 0; k < n; ++k) b[k] = static_cast<uint8_t>(seed + k * 7);
  return b;
}

// Every value type, a nested array, alignment 64 and three tensors of different types.
inline GgufWriter sample_writer() {
  GgufWriter w;
  w.add_string("general.architecture", "llama");
  w.add_string("general.name", "tiny \"test\"\nmodel");
  w.add<uint8_t>("t.u8", 200);
  w.add<int8_t>("t.i8", -100);
  w.add<uint16_t>("t.u16", 60000);
  w.add<int16_t>("t.i16", -30000);
  w.add<uint32_t>("llama.block_count", 30);
  w.add<int32_t>("t.i32", -2000000000);
  w.add<float>("t.f32", 0.5f);
  w.add<bool>("t.bool", true);
  w.add<uint64_t>("t.u64", 1ull << 40);
  w.add<uint64_t>("t.u64_huge", ~0ull);
  w.add<int64_t>("t.i64", -(1ll << 40));
  w.add<double>("t.f64", 1e-6);
  w.add_string_array("tokenizer.ggml.tokens", {"<s>", "</s>", "hello", "", "world"});
  w.add_array<float>("tokenizer.ggml.scores", {0.f, -1.f, 2.5f, 3.f, 4.f});
  w.add_array<int32_t>("tokenizer.ggml.token_type", {3, 3, 1, 1, 1});
  w.add_array<uint8_t>("t.arr_u8", {1, 2, 255});
  w.add_array<int64_t>("t.arr_i64", {1ll << 40});
  w.add_array<bool>("t.arr_bool", {true, false});
  // ARRAY of two ARRAYs of U16: [[7], [8, 9]].
  Bytes nested;
  GgufWriter::put_u32(&nested, static_cast<uint32_t>(GgufValueType::ARRAY));
  GgufWriter::put_u64(&nested, 2);
  for (std::vector<uint16_t> inner : {std::vector<uint16_t>{7}, std::vector<uint16_t>{8, 9}}) {
    GgufWriter::put_u32(&nested, static_cast<uint32_t>(GgufValueType::U16));
    GgufWriter::put_u64(&nested, inner.size());
    for (uint16_t x : inner)
      nested.insert(nested.end(), {static_cast<uint8_t>(x), static_cast<uint8_t>(x >> 8)});
  }
  w.add_encoded("t.nested", static_cast<uint32_t>(GgufValueType::ARRAY), nested);
  w.set_alignment(64);
  w.add_tensor("tok_embd", static_cast<uint32_t>(GgmlType::Q8_0), {64, 3}, filled(2 * 34 * 3, 1));
  w.add_tensor("norm", static_cast<uint32_t>(GgmlType::F32), {10}, filled(40, 2));
  w.add_tensor("blk.0.w", static_cast<uint32_t>(GgmlType::Q4_1), {32, 2, 2}, filled(20 * 4, 3));
  return w;
}

inline size_t find_bytes(const Bytes& b, const std::string& needle) {
  auto it = std::search(b.begin(), b.end(), needle.begin(), needle.end());
  EXPECT_NE(it, b.end()) << needle;
  return static_cast<size_t>(it - b.begin());
}

// Offset of the field that follows a length-prefixed string (a key's value type, a tensor's n_dims).
inline size_t after_string(const Bytes& b, const std::string& s) { return find_bytes(b, s) + s.size(); }

inline void put32(Bytes* b, size_t at, uint32_t v) { std::memcpy(b->data() + at, &v, 4); }
inline void put64(Bytes* b, size_t at, uint64_t v) { std::memcpy(b->data() + at, &v, 8); }

}  // namespace agentkv::gguf_test
