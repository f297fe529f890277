// read_model_config refuses float hyperparameters the forward pass cannot use: NaN, inf, 0 or a
// negative rms epsilon or RoPE base (a NaN epsilon used to give 0 tokens), each error naming the key.
// Phi-3's LongRoPE: the factor set the context per sequence picks, the attention factor, and the
// original context a LongRoPE file must name.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <utility>
#include <vector>

#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"
#include "model/model.h"
#include "model/model_config.h"
#include "gguf/ggml_types.h"

namespace agentkv {
namespace {

std::vector<uint8_t> llama_header(std::optional<float> eps, std::optional<float> rope_base,
                                  const std::string& arch = "llama", const std::string& scaling = "",
                                  float scaling_factor = 4.0f) {
  GgufWriter w;
  w.add_string("general.architecture", arch);
  const std::string p = arch + ".";
  w.add<uint32_t>(p + "block_count", 2);
  w.add<uint32_t>(p + "embedding_length", 64);
  w.add<uint32_t>(p + "feed_forward_length", 128);
  w.add<uint32_t>(p + "attention.head_count", 4);
  w.add<uint32_t>(p + "context_length", 512);
  if (eps) w.add<float>(p + "attention.layer_norm_rms_epsilon", *eps);
  if (rope_base) w.add<float>(p + "rope.freq_base", *rope_base);
  if (!scaling.empty()) {
    w.add_string(p + "rope.scaling.type", scaling);
    w.add<float>(p + "rope.scaling.factor", scaling_factor);
  }
  w.add<float>("t.swa_base", rope_base.value_or(10000.f));
  return w.finish();
}

Result<ModelConfig> config_of(const std::vector<uint8_t>& bytes) {
  auto f = GgufFile::parse(bytes.data(), bytes.size());
  if (!f.ok()) return f.status_error();
  return read_model_config(**f);
}

const float kBad[] = {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                      -std::numeric_limits<float>::infinity(), 0.0f, -1e-5f, -10000.0f};

TEST(ModelConfig, AcceptsUsualValuesAndTheRopeDefault) {
  auto c = config_of(llama_header(1e-5f, 500000.f));
  ASSERT_TRUE(c.ok()) << c.error();
  EXPECT_FLOAT_EQ(c->rms_eps, 1e-5f);
  EXPECT_FLOAT_EQ(c->rope_base, 500000.f);
  auto d = config_of(llama_header(1e-6f, std::nullopt));
  ASSERT_TRUE(d.ok()) << d.error();
  EXPECT_FLOAT_EQ(d->rope_base, 10000.f);
  auto missing = config_of(llama_header(std::nullopt, 10000.f));
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().find("llama.attention.layer_norm_rms_epsilon"), std::string::npos) << missing.error();
}

TEST(ModelConfig, RefusesABadRmsEpsilonNamingTheKey) {
  for (float eps : kBad) {
    auto c = config_of(llama_header(eps, 10000.f));
    ASSERT_FALSE(c.ok()) << eps;
    EXPECT_NE(c.error().find("'llama.attention.layer_norm_rms_epsilon'"), std::string::npos) << c.error();
  }
  EXPECT_FALSE(config_of(llama_header(2.0f, 10000.f)).ok());  // above 1: not an epsilon
}

TEST(ModelConfig, RefusesABadRopeBaseNamingTheKey) {
  for (float base : kBad) {
    auto c = config_of(llama_header(1e-5f, base));
    ASSERT_FALSE(c.ok()) << base;
    EXPECT_NE(c.error().find("'llama.rope.freq_base'"), std::string::npos) << c.error();
  }
}

// The helper the architectures use for their own keys (gemma3.rope.freq_base_swa).
TEST(ModelConfig, ArchitectureFloatKeysGoThroughTheSameCheck) {
  for (float base : kBad) {
    const auto bytes = llama_header(1e-5f, base);
    auto f = GgufFile::parse(bytes.data(), bytes.size());
    ASSERT_TRUE(f.ok()) << f.error();
    auto v = read_positive_float(**f, "t.swa_base", 10000.0, 1e30);
    ASSERT_FALSE(v.ok()) << base;
    EXPECT_NE(v.error().find("'t.swa_base'"), std::string::npos) << v.error();
  }
  const auto bytes = llama_header(1e-5f, 10000.f);
  auto f = GgufFile::parse(bytes.data(), bytes.size());
  ASSERT_TRUE(f.ok());
  auto absent = read_positive_float(**f, "t.absent", 7.0, 1e30);
  ASSERT_TRUE(absent.ok());
  EXPECT_FLOAT_EQ(*absent, 7.0f);
}

TEST(ModelConfig, RopeScalingIsLinearOrRefusedNamingTheType) {
  auto lin = config_of(llama_header(1e-5f, 10000.f, "llama", "linear", 4.0f));
  ASSERT_TRUE(lin.ok()) << lin.error();
  EXPECT_FLOAT_EQ(lin->rope_freq_scale, 0.25f);
  auto none = config_of(llama_header(1e-5f, 10000.f, "llama", "none"));
  ASSERT_TRUE(none.ok()) << none.error();
  EXPECT_FLOAT_EQ(none->rope_freq_scale, 1.0f);
  auto yarn = config_of(llama_header(1e-5f, 10000.f, "llama", "yarn"));
  ASSERT_FALSE(yarn.ok());
  EXPECT_NE(yarn.error().find("'yarn'"), std::string::npos) << yarn.error();
  EXPECT_FALSE(config_of(llama_header(1e-5f, 10000.f, "llama", "linear", 0.0f)).ok());
}

// A file of an architecture agentkv does not run: one line naming it and the supported list.
TEST(ModelConfig, UnsupportedArchitectureIsNamedWithTheSupportedList) {
  const std::vector<uint8_t> bytes = llama_header(1e-5f, 10000.f, "mamba");
  auto f = GgufFile::parse(bytes.data(), bytes.size());
  ASSERT_TRUE(f.ok()) << f.error();
  auto m = create_model(**f);
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.error(), "unsupported architecture 'mamba' (supported: llama, gemma3, qwen2, qwen3, phi3, gemma2)");
}

// A one-layer phi3 file, F32 weights (zeros), head_dim 16, with LongRoPE's two factor sets: short
// 1, 2, ..., 8 and long 10, 20, ..., 80.
std::vector<uint8_t> phi3_longrope(bool with_orig_ctx, std::optional<float> attn_factor) {
  constexpr int64_t d = 64, ff = 128, vocab = 8, half_rot = 8;
  GgufWriter w;
  w.add_string("general.architecture", "phi3");
  w.add<uint32_t>("phi3.block_count", 1);
  w.add<uint32_t>("phi3.embedding_length", uint32_t(d));
  w.add<uint32_t>("phi3.feed_forward_length", uint32_t(ff));
  w.add<uint32_t>("phi3.attention.head_count", 4);
  w.add<uint32_t>("phi3.context_length", 2048);
  w.add<float>("phi3.attention.layer_norm_rms_epsilon", 1e-5f);
  if (with_orig_ctx) w.add<uint32_t>("phi3.rope.scaling.original_context_length", 256);
  if (attn_factor) w.add<float>("phi3.rope.scaling.attn_factor", *attn_factor);
  auto f32 = [&](const std::string& name, std::vector<int64_t> ne, std::vector<float> v = {}) {
    int64_t n = 1;
    for (int64_t e : ne) n *= e;
    v.resize(size_t(n), 0.0f);
    std::vector<uint8_t> bytes(v.size() * sizeof(float));
    std::memcpy(bytes.data(), v.data(), bytes.size());
    w.add_tensor(name, uint32_t(GgmlType::F32), ne, bytes);
  };
  f32("token_embd.weight", {d, vocab});
  f32("blk.0.attn_norm.weight", {d});
  f32("blk.0.attn_qkv.weight", {d, 3 * d});
  f32("blk.0.attn_output.weight", {d, d});
  f32("blk.0.ffn_norm.weight", {d});
  f32("blk.0.ffn_up.weight", {d, 2 * ff});
  f32("blk.0.ffn_down.weight", {ff, d});
  f32("output_norm.weight", {d});
  std::vector<float> shrt, lng;
  for (int i = 1; i <= half_rot; ++i) {
    shrt.push_back(float(i));
    lng.push_back(10.0f * float(i));
  }
  f32("rope_factors_long.weight", {half_rot}, lng);
  f32("rope_factors_short.weight", {half_rot}, shrt);
  return w.finish();
}

Result<ModelConfig> model_config_of(const std::vector<uint8_t>& bytes, int n_ctx) {
  auto f = GgufFile::parse(bytes.data(), bytes.size());
  if (!f.ok()) return f.status_error();
  auto m = create_model(**f, ModelOptions{.n_ctx = n_ctx});
  if (!m.ok()) return m.status_error();
  return (*m)->config();
}

TEST(ModelConfig, LongRopeTakesTheShortFactorsUpToTheOriginalContextAndTheLongOnesBeyond) {
  const auto bytes = phi3_longrope(true, 1.25f);
  const std::vector<float> shrt = {1, 2, 3, 4, 5, 6, 7, 8}, lng = {10, 20, 30, 40, 50, 60, 70, 80};
  for (const auto& [n_ctx, want] : {std::pair<int, std::vector<float>>{1, shrt}, {256, shrt}, {257, lng}, {512, lng},
                                    {0, lng} /* the training context, 2048 */}) {
    auto c = model_config_of(bytes, n_ctx);
    ASSERT_TRUE(c.ok()) << c.error();
    EXPECT_TRUE(c->longrope);
    EXPECT_EQ(c->rope_orig_ctx, 256);
    EXPECT_EQ(c->n_ctx_seq, n_ctx > 0 ? n_ctx : 2048);
    EXPECT_EQ(c->rope_freq_factors, want) << "n_ctx " << n_ctx;
    EXPECT_FLOAT_EQ(c->rope_attn_factor, 1.25f);
    EXPECT_EQ(rope_uses_long_factors(*c, n_ctx > 0 ? n_ctx : 2048), want == lng);
  }
}

TEST(ModelConfig, LongRopeAttentionFactorIsOneWhenAbsentAndMustBePositive) {
  auto c = model_config_of(phi3_longrope(true, std::nullopt), 256);
  ASSERT_TRUE(c.ok()) << c.error();
  EXPECT_EQ(c->rope_attn_factor, 1.0f);  // llama.cpp's default
  for (float bad : kBad) {
    auto b = model_config_of(phi3_longrope(true, bad), 256);
    ASSERT_FALSE(b.ok()) << bad;
    EXPECT_NE(b.error().find("'phi3.rope.scaling.attn_factor'"), std::string::npos) << b.error();
  }
}

TEST(ModelConfig, LongRopeWithoutTheOriginalContextIsRefusedNamingTheKey) {
  auto c = model_config_of(phi3_longrope(false, 1.25f), 256);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.error().find("'phi3.rope.scaling.original_context_length'"), std::string::npos) << c.error();
}

}  // namespace
}  // namespace agentkv
