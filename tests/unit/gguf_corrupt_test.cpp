// Each test corrupts one field of a valid synthetic file and checks the error names that field.
#include <gtest/gtest.h>

#include <functional>

#include "gguf/gguf_file.h"
#include "gguf_test_util.h"

namespace agentkv {
namespace {

using gguf_test::after_string;
using gguf_test::Bytes;
using gguf_test::find_bytes;
using gguf_test::put32;
using gguf_test::put64;

struct Corruption {
  const char* what;
  std::function<void(Bytes*)> patch;
  std::vector<std::string> expect;  // substrings the error must contain
};

std::string parse_error(const Bytes& b) {
  auto r = GgufFile::parse(b.data(), b.size());
  return r.ok() ? "<parsed ok>" : r.error();
}

void expect_error(const Corruption& c) {
  Bytes b = gguf_test::sample_writer().finish();
  c.patch(&b);
  std::string err = parse_error(b);
  SCOPED_TRACE(c.what);
  EXPECT_EQ(err.rfind("gguf: ", 0), 0u) << err;
  EXPECT_EQ(err.find('\n'), std::string::npos) << err;
  for (const std::string& s : c.expect)
    EXPECT_NE(err.find(s), std::string::npos) << "'" << s << "' not in: " << err;
}

// Offset of tensor `name`'s n_dims field; ne, type and offset follow it.
size_t tensor_field(const Bytes& b, const std::string& name) { return after_string(b, name); }

TEST(GgufCorrupt, HeaderFields) {
  for (const Corruption& c : std::vector<Corruption>{
           {"magic", [](Bytes* b) { put32(b, 0, 0x12345678); }, {"bad magic 0x12345678"}},
           {"version", [](Bytes* b) { put32(b, 4, 2); }, {"unsupported version 2"}},
           {"tensor_count", [](Bytes* b) { put64(b, 8, 1ull << 60); }, {"tensor_count 1152921504606846976"}},
           {"kv_count", [](Bytes* b) { put64(b, 16, ~0ull); }, {"kv_count 18446744073709551615"}},
       }) {
    expect_error(c);
  }
}

TEST(GgufCorrupt, MetadataFields) {
  for (const Corruption& c : std::vector<Corruption>{
           {"key length huge",
            [](Bytes* b) { put64(b, 24, 1ull << 62); },
            {"metadata key #0 key length 4611686018427387904 exceeds the limit 65535"}},
           {"key length past end",
            [](Bytes* b) { put64(b, 24, 65000); },
            {"absurd string length 65000", "key #0"}},
           {"key invalid", [](Bytes* b) { (*b)[find_bytes(*b, "t.u8")] = ' '; }, {"not a valid key"}},
           {"key duplicate",
            [](Bytes* b) { (*b)[find_bytes(*b, "t.i8") + 2] = 'u'; },
            {"duplicate metadata key 't.u8' (#2 and #3)"}},
           {"value type",
            [](Bytes* b) { put32(b, after_string(*b, "general.name"), 13); },
            {"metadata key #1 (general.name) has unknown value type id 13"}},
           {"string length",
            [](Bytes* b) { put64(b, after_string(*b, "general.name") + 4, 1ull << 40); },
            {"absurd string length 1099511627776", "(general.name) string"}},
           {"bool value",
            [](Bytes* b) { (*b)[after_string(*b, "t.bool") + 4] = 2; },
            {"(t.bool) bool value 2"}},
           {"array element type",
            [](Bytes* b) { put32(b, after_string(*b, "tokenizer.ggml.tokens") + 4, 99); },
            {"(tokenizer.ggml.tokens) has unknown array element type id 99"}},
           {"array count",
            [](Bytes* b) { put64(b, after_string(*b, "tokenizer.ggml.tokens") + 8, 1ull << 61); },
            {"(tokenizer.ggml.tokens) array count 2305843009213693952 of STRING cannot fit"}},
           {"array element string length",
            [](Bytes* b) { put64(b, after_string(*b, "hello") - 5 - 8, 1000000); },
            {"tokenizer.ggml.tokens) array element 2", "absurd string length 1000000"}},
           {"numeric array count",
            [](Bytes* b) { put64(b, after_string(*b, "tokenizer.ggml.scores") + 8, 1u << 30); },
            {"(tokenizer.ggml.scores) array count 1073741824 of F32 cannot fit"}},
           {"nested too deep",
            [](Bytes* b) { put32(b, after_string(*b, "t.nested") + 4 + 4 + 8, 9); },
            {"(t.nested) array element 0 has arrays nested more than two deep"}},
           {"alignment 0",
            [](Bytes* b) { put32(b, after_string(*b, "general.alignment") + 4, 0); },
            {"general.alignment 0 is not a power of two"}},
           {"alignment 3",
            [](Bytes* b) { put32(b, after_string(*b, "general.alignment") + 4, 3); },
            {"general.alignment 3 is not a power of two"}},
           {"alignment type",
            [](Bytes* b) { put32(b, after_string(*b, "general.alignment"), 6); },
            {"general.alignment has type F32, expected integer"}},
       }) {
    expect_error(c);
  }
}

TEST(GgufCorrupt, TensorInfoFields) {
  for (const Corruption& c : std::vector<Corruption>{
           {"name length",
            [](Bytes* b) { put64(b, find_bytes(*b, "norm") - 8, 65); },
            {"tensor info #1 name length 65 exceeds the limit 64"}},
           {"empty name",
            [](Bytes* b) { put64(b, find_bytes(*b, "norm") - 8, 0); },
            {"tensor info #1 has an empty name"}},
           {"n_dims 0",
            [](Bytes* b) { put32(b, tensor_field(*b, "norm"), 0); },
            {"tensor 'norm' n_dims 0 is outside 1..4"}},
           {"n_dims 5", [](Bytes* b) { put32(b, tensor_field(*b, "norm"), 5); }, {"tensor 'norm' n_dims 5"}},
           {"ne 0",
            [](Bytes* b) { put64(b, tensor_field(*b, "blk.0.w") + 12, 0); },
            {"tensor 'blk.0.w' dimension ne[1] = 0"}},
           {"ne huge",
            [](Bytes* b) { put64(b, tensor_field(*b, "blk.0.w") + 12, ~0ull); },
            {"tensor 'blk.0.w' dimension ne[1] = 18446744073709551615"}},
           {"ne product overflow",
            [](Bytes* b) {
              put64(b, tensor_field(*b, "blk.0.w") + 12, 1ull << 40);
              put64(b, tensor_field(*b, "blk.0.w") + 20, 1ull << 40);
            },
            {"tensor 'blk.0.w' dimension product overflows"}},
           {"ne0 not block multiple",
            [](Bytes* b) { put64(b, tensor_field(*b, "tok_embd") + 4, 33); },
            {"tensor 'tok_embd' ne[0] = 33 is not a multiple of the Q8_0 block size 32"}},
           {"type id",
            [](Bytes* b) { put32(b, tensor_field(*b, "norm") + 12, 99); },
            {"tensor 'norm' has unknown type id 99"}},
           {"offset misaligned",
            [](Bytes* b) { put64(b, tensor_field(*b, "norm") + 16, 65); },
            {"tensor 'norm' offset 65 not a multiple of alignment 64"}},
           {"offset past end",
            [](Bytes* b) { put64(b, tensor_field(*b, "norm") + 16, 64 * 1000); },
            {"tensor 'norm' data [", "past end of file (size"}},
           {"offset huge",
            [](Bytes* b) { put64(b, tensor_field(*b, "norm") + 16, ~0ull << 6); },
            {"tensor 'norm' offset", "past end of file"}},
           {"offsets overlap",
            [](Bytes* b) { put64(b, tensor_field(*b, "norm") + 16, 192); },
            {"tensors 'tok_embd' and 'norm' overlap"}},
           {"offsets equal",
            [](Bytes* b) { put64(b, tensor_field(*b, "norm") + 16, 0); },
            {"overlap", "'tok_embd'", "'norm'"}},
       }) {
    expect_error(c);
  }
}

TEST(GgufCorrupt, DuplicateTensorName) {
  GgufWriter w = gguf_test::sample_writer();
  w.add_tensor("norm", static_cast<uint32_t>(GgmlType::F32), {10}, gguf_test::filled(40, 4));
  Bytes b = w.finish();
  EXPECT_EQ(parse_error(b), "gguf: duplicate tensor name 'norm' (tensor infos #1 and #3)");
}

TEST(GgufCorrupt, EveryTruncationFailsWithOneLine) {
  Bytes full = gguf_test::sample_writer().finish();
  for (size_t n = 0; n < full.size(); ++n) {
    Bytes b(full.begin(), full.begin() + static_cast<ptrdiff_t>(n));
    std::string err = parse_error(b);
    ASSERT_EQ(err.rfind("gguf: ", 0), 0u) << "prefix " << n << ": " << err;
    ASSERT_EQ(err.find('\n'), std::string::npos) << err;
  }
}

TEST(GgufCorrupt, TruncationInsideAnArrayNamesTheElement) {
  // Long strings so the count check passes and the cut lands inside element 3's length field.
  std::vector<std::string> tokens = {std::string(100, 'x'), std::string(100, 'y'), "a", "b", "c"};
  GgufWriter w;
  w.add<uint32_t>("general.alignment", 32);
  w.add_string_array("tokenizer.ggml.tokens", tokens);
  Bytes full = w.finish();
  ASSERT_GT(full.size(), 15u);
  Bytes b(full.begin(), full.end() - 15);  // "b" and "c" take 9 bytes each at the end
  EXPECT_EQ(parse_error(b),
            "gguf: truncated file while reading metadata key #1 (tokenizer.ggml.tokens) array element 3 "
            "string length (need 8 bytes at offset " +
                std::to_string(b.size() - 3) + ", file size " + std::to_string(b.size()) + ")");
}

TEST(GgufCorrupt, EmptyAndTinyInputs) {
  EXPECT_NE(parse_error({}).find("truncated file while reading header magic"), std::string::npos);
  auto r = GgufFile::parse(nullptr, 0);
  EXPECT_FALSE(r.ok());
}

}  // namespace
}  // namespace agentkv
