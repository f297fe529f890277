// Tiny decoders with random F32 weights, built as GGUF files in memory, for tests that run a whole
// forward pass with no real model: two blocks, n_embd 32, four query heads on two KV heads of 8,
// a vocabulary of 16. "llama" (the gated decoder), "gemma3" (sandwich norms, Q/K norms, embedding
// scale, GELU, sliding window of 4 on both layers) and "gemma2" (attention and final soft-caps set
// low enough to bend, Q scaled after RoPE, one sliding-window layer).
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "gguf/ggml_types.h"
#include "gguf/gguf_file.h"
#include "gguf/gguf_writer.h"
#include "model/model.h"

namespace agentkv::testing {

struct SyntheticModel {
  std::vector<uint8_t> bytes;       // the GGUF file; `file` reads it in place
  std::unique_ptr<GgufFile> file;
  std::unique_ptr<Model> model;
};

inline constexpr int kSynthVocab = 16;

inline std::vector<uint8_t> synthetic_decoder_gguf(const std::string& arch, uint64_t seed) {
  constexpr int64_t d = 32, ff = 48, n_layer = 2, n_head = 4, n_head_kv = 2, hd = 8;
  const bool gemma = arch != "llama";
  GgufWriter w;
  w.add_string("general.architecture", arch);
  const std::string p = arch + ".";
  w.add<uint32_t>(p + "block_count", n_layer);
  w.add<uint32_t>(p + "embedding_length", d);
  w.add<uint32_t>(p + "feed_forward_length", ff);
  w.add<uint32_t>(p + "attention.head_count", n_head);
  w.add<uint32_t>(p + "attention.head_count_kv", n_head_kv);
  w.add<uint32_t>(p + "attention.key_length", hd);
  w.add<uint32_t>(p + "attention.value_length", hd);
  w.add<uint32_t>(p + "context_length", 256);
  w.add<float>(p + "attention.layer_norm_rms_epsilon", 1e-6f);
  if (gemma) w.add<uint32_t>(p + "attention.sliding_window", 4);
  if (arch == "gemma2") {
    w.add<float>("gemma2.attn_logit_softcapping", 2.0f);
    w.add<float>("gemma2.final_logit_softcapping", 1.5f);
  }
  uint64_t state = seed;
  auto uniform = [&]() {  // [-1, 1)
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return float(double(state >> 11) * 0x1.0p-53 * 2.0 - 1.0);
  };
  auto tensor = [&](const std::string& name, std::vector<int64_t> ne, float center, float spread) {
    int64_t n = 1;
    for (int64_t e : ne) n *= e;
    std::vector<float> v(static_cast<size_t>(n));
    for (float& x : v) x = center + spread * uniform();
    std::vector<uint8_t> raw(v.size() * sizeof(float));
    std::memcpy(raw.data(), v.data(), raw.size());
    w.add_tensor(name, uint32_t(GgmlType::F32), ne, raw);
  };
  auto matrix = [&](const std::string& name, int64_t in, int64_t out) {
    tensor(name, {in, out}, 0.0f, 1.7f / std::sqrt(float(in)));
  };
  auto norm = [&](const std::string& name, int64_t n) { tensor(name, {n}, 1.0f, 0.2f); };
  tensor("token_embd.weight", {d, kSynthVocab}, 0.0f, gemma ? 0.3f : 1.0f);
  for (int il = 0; il < n_layer; ++il) {
    const std::string b = "blk." + std::to_string(il) + ".";
    norm(b + "attn_norm.weight", d);
    matrix(b + "attn_q.weight", d, n_head * hd);
    matrix(b + "attn_k.weight", d, n_head_kv * hd);
    matrix(b + "attn_v.weight", d, n_head_kv * hd);
    matrix(b + "attn_output.weight", n_head * hd, d);
    norm(b + "ffn_norm.weight", d);
    matrix(b + "ffn_gate.weight", d, ff);
    matrix(b + "ffn_up.weight", d, ff);
    matrix(b + "ffn_down.weight", ff, d);
    if (gemma) {
      norm(b + "post_attention_norm.weight", d);
      norm(b + "post_ffw_norm.weight", d);
    }
    if (arch == "gemma3") {
      norm(b + "attn_q_norm.weight", hd);
      norm(b + "attn_k_norm.weight", hd);
    }
  }
  norm("output_norm.weight", d);
  if (!gemma) matrix("output.weight", d, kSynthVocab);
  return w.finish();
}

inline SyntheticModel synthetic_decoder(const std::string& arch, uint64_t seed = 1) {
  SyntheticModel m;
  m.bytes = synthetic_decoder_gguf(arch, seed);
  auto f = GgufFile::parse(m.bytes.data(), m.bytes.size());
  EXPECT_TRUE(f.ok()) << f.error();
  m.file = std::move(*f);
  auto model = create_model(*m.file);
  EXPECT_TRUE(model.ok()) << model.error();
  m.model = std::move(*model);
  return m;
}

}  // namespace agentkv::testing
