#include "gguf/gguf_file.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>

#include "gguf_test_util.h"
#include "util/mapped_file.h"

namespace agentkv {
namespace {

using gguf_test::Bytes;

std::unique_ptr<GgufFile> parse_ok(const Bytes& b) {
  auto r = GgufFile::parse(b.data(), b.size());
  EXPECT_TRUE(r.ok()) << r.error();
  return r.ok() ? std::move(r).value() : nullptr;
}

TEST(GgufFile, ReadsEveryValueType) {
  Bytes b = gguf_test::sample_writer().finish();
  auto f = parse_ok(b);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->version(), 3u);
  EXPECT_EQ(f->get_string("general.architecture").value(), "llama");
  EXPECT_EQ(f->get_int("t.u8").value(), 200);
  EXPECT_EQ(f->get_int("t.i8").value(), -100);
  EXPECT_EQ(f->get_int("t.u16").value(), 60000);
  EXPECT_EQ(f->get_int("t.i16").value(), -30000);
  EXPECT_EQ(f->get_int("llama.block_count").value(), 30);
  EXPECT_EQ(f->get_int("t.i32").value(), -2000000000);
  EXPECT_EQ(f->get_int("t.u64").value(), 1ll << 40);
  EXPECT_EQ(f->get_int("t.i64").value(), -(1ll << 40));
  EXPECT_FLOAT_EQ(f->get_float("t.f32").value(), 0.5);
  EXPECT_DOUBLE_EQ(f->get_float("t.f64").value(), 1e-6);
  EXPECT_DOUBLE_EQ(f->get_float("llama.block_count").value(), 30.0);
  EXPECT_TRUE(f->get_bool("t.bool").value());
  EXPECT_EQ(f->find("t.u64_huge")->u, ~0ull);
  EXPECT_EQ(f->get_string_array("tokenizer.ggml.tokens").value(),
            (std::vector<std::string>{"<s>", "</s>", "hello", "", "world"}));
  EXPECT_EQ(f->get_float_array("tokenizer.ggml.scores").value(),
            (std::vector<float>{0.f, -1.f, 2.5f, 3.f, 4.f}));
  EXPECT_EQ(f->get_int_array("tokenizer.ggml.token_type").value(), (std::vector<int32_t>{3, 3, 1, 1, 1}));
  EXPECT_EQ(f->get_int_array("t.arr_u8").value(), (std::vector<int32_t>{1, 2, 255}));
  EXPECT_EQ(f->get_int_array("t.arr_bool").value(), (std::vector<int32_t>{1, 0}));
  const GgufValue* nested = f->find("t.nested");
  ASSERT_NE(nested, nullptr);
  ASSERT_EQ(nested->array_values.size(), 2u);
  EXPECT_EQ(nested->array_values[1].array_int(1), 9);
  EXPECT_EQ(f->keys().front(), "general.architecture");
  EXPECT_EQ(f->keys().size(), 22u);  // 21 added + general.alignment
  EXPECT_EQ(f->alignment(), 64u);
}

TEST(GgufFile, TensorsArePlacedAtAlignedOffsets) {
  Bytes b = gguf_test::sample_writer().finish();
  auto f = parse_ok(b);
  ASSERT_TRUE(f);
  ASSERT_EQ(f->tensors().size(), 3u);
  EXPECT_EQ(f->data_offset() % 64, 0u);
  const GgufTensorInfo* t = f->tensor("blk.0.w");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->n_dims, 3);
  EXPECT_EQ(t->ne[0], 32);
  EXPECT_EQ(t->ne[2], 2);
  EXPECT_EQ(t->ne[3], 1);
  EXPECT_EQ(t->nbytes, 80u);
  EXPECT_EQ(t->offset % 64, 0u);
  EXPECT_EQ(t->data, b.data() + f->data_offset() + t->offset);
  EXPECT_EQ(t->data[0], 3);  // first byte of filled(80, 3)
  EXPECT_EQ(f->tensor("tok_embd")->nbytes, 204u);
  EXPECT_EQ(f->tensor("missing"), nullptr);
}

TEST(GgufFile, GettersNameTheKeyAndTheProblem) {
  Bytes b = gguf_test::sample_writer().finish();
  auto f = parse_ok(b);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->get_int("llama.nope").error(), "gguf: key 'llama.nope' missing");
  EXPECT_EQ(f->get_int("general.name").error(), "gguf: key 'general.name' has type STRING, expected integer");
  EXPECT_NE(f->get_int("t.u64_huge").error().find("does not fit in int64"), std::string::npos);
  EXPECT_NE(f->get_string("t.u8").error().find("has type U8"), std::string::npos);
  EXPECT_NE(f->get_float("general.name").error().find("expected float"), std::string::npos);
  EXPECT_NE(f->get_bool("t.u8").error().find("not 0 or 1"), std::string::npos);
  EXPECT_NE(f->get_string_array("tokenizer.ggml.scores").error().find("array of F32"), std::string::npos);
  EXPECT_NE(f->get_int_array("t.arr_i64").error().find("element 0 does not fit in int32"), std::string::npos);
  EXPECT_NE(f->get_int_array("tokenizer.ggml.scores").error().find("expected array of integers"),
            std::string::npos);
  EXPECT_EQ(f->get_int_or("llama.nope", 7), 7);
  EXPECT_EQ(f->get_int_or("llama.block_count", 7), 30);
  EXPECT_EQ(f->get_float_or("general.name", 1.5), 1.5);
  EXPECT_EQ(f->get_bool_or("llama.nope", true), true);
  EXPECT_EQ(f->get_string_or("llama.nope", "x"), "x");
  EXPECT_EQ(f->get_string_or("general.architecture", "x"), "llama");
}

TEST(GgufFile, ValueToStringTruncatesArraysAndEscapes) {
  Bytes b = gguf_test::sample_writer().finish();
  auto f = parse_ok(b);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->value_to_string("tokenizer.ggml.tokens", 2), "[\"<s>\", \"</s>\", ... (5 items)]");
  EXPECT_EQ(f->value_to_string("general.name"), "\"tiny \\\"test\\\"\\nmodel\"");
  EXPECT_EQ(f->value_to_string("t.bool"), "true");
  EXPECT_EQ(f->value_to_string("t.u64_huge"), "18446744073709551615");
  EXPECT_EQ(f->value_to_string("t.nested"), "[[7], [8, 9]]");
  EXPECT_EQ(f->value_to_string("t.f32"), "0.5");
  EXPECT_EQ(f->value_to_string("absent"), "");
}

TEST(GgufFile, LargeStringArrayLoads) {
  // Gemma's tokenizer has 262144 strings (its load time is reported by `agentkv inspect`, not asserted).
  std::vector<std::string> tokens(262144);
  for (size_t k = 0; k < tokens.size(); ++k) tokens[k] = "tok" + std::to_string(k);
  GgufWriter w;
  w.add_string_array("tokenizer.ggml.tokens", tokens);
  Bytes b = w.finish();
  auto f = parse_ok(b);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->find("tokenizer.ggml.tokens")->array_strings.size(), 262144u);
  EXPECT_EQ(f->find("tokenizer.ggml.tokens")->array_strings[262143], "tok262143");
}

TEST(GgufFile, OpenMapsAFileAndReportsMissingOnes) {
  auto missing = GgufFile::open("/nonexistent/x.gguf");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error(), "cannot open /nonexistent/x.gguf: No such file or directory");

  std::string path = (std::filesystem::temp_directory_path() / "agentkv_gguf_open_test.gguf").string();
  ASSERT_TRUE(gguf_test::sample_writer().write_file(path).ok());
  auto f = GgufFile::open(path);
  ASSERT_TRUE(f.ok()) << f.error();
  EXPECT_EQ((*f)->file_size(), std::filesystem::file_size(path));
  EXPECT_EQ((*f)->tensor("norm")->data[0], 2);
  std::remove(path.c_str());
}

TEST(MappedFile, EmptyFileHasNoData) {
  std::string path = (std::filesystem::temp_directory_path() / "agentkv_mapped_empty").string();
  std::FILE* fp = std::fopen(path.c_str(), "wb");
  ASSERT_NE(fp, nullptr);
  std::fclose(fp);
  auto m = MappedFile::open(path, 1024);
  ASSERT_TRUE(m.ok()) << m.error();
  EXPECT_EQ(m->size(), 0u);
  MappedFile moved = std::move(m.value());
  EXPECT_EQ(moved.data(), nullptr);
  std::remove(path.c_str());
  auto bad = GgufFile::open(path);
  EXPECT_EQ(bad.error(), "cannot open " + path + ": No such file or directory");
}

}  // namespace
}  // namespace agentkv
