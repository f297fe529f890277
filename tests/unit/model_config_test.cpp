// read_model_config refuses float hyperparameters the forward pass cannot use: NaN, inf, 0 or a
// negative rms epsilon or RoPE base (a NaN epsilon used to give 0 tokens), each error naming the key.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <optional>

#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"
#include "model/model.h"
#include "model/model_config.h"

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

}  // namespace
}  // namespace agentkv
