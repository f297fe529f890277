#include "model/gated_decoder.h"

#include <cmath>
#include <cstring>
#include <vector>

#include "gguf/gguf_file.h"
#include "ops/norm.h"
#include "ops/rope.h"

namespace agentkv {

namespace {

class GatedDecoder final : public Model {
 public:
  GatedDecoder(ModelConfig cfg, DecoderWeights w) : Model(std::move(cfg)), w_(std::move(w)), rope_(agentkv::layer_rope(cfg_, 0)) {}

  const Rope& layer_rope(int) const override { return rope_; }
  const DecoderWeights& weights() const override { return w_; }

 protected:
  void forward_layers_validated(const Batch& b, const KvArena& kv, int layer_begin, int layer_end, float* x,
                                float* logits, ThreadPool& pool) const override {
    const ModelConfig& c = cfg_;
    const int64_t n = b.size();
    const int d = c.n_embd;
    std::vector<float> h(n * d), gate(n * c.n_ff), up(n * c.n_ff);
    AttentionScratch scratch(c, n);
    if (layer_begin == 0) embed_tokens(w_.embd, b, 1.0f, x, pool);
    for (int il = layer_begin; il < layer_end; ++il) {
      const DecoderLayer& L = w_.layers[il];
      norm_rows(x, L.attn_norm, h.data(), n, d, c.rms_eps, pool);
      attention_block(c, b, kv, il, L.attn, L.extras, rope_, 0, h.data(), h.data(), scratch, pool);
      add_inplace(x, h.data(), n * d);

      norm_rows(x, L.ffn_norm, h.data(), n, d, c.rms_eps, pool);
      project(L.ffn.gate, b, il, LoraProj::kGate, h.data(), gate.data(), pool);
      project(L.ffn.up, b, il, LoraProj::kUp, h.data(), up.data(), pool);
      silu_mul(gate.data(), up.data(), n * c.n_ff);
      project(L.ffn.down, b, il, LoraProj::kDown, gate.data(), h.data(), pool);
      add_inplace(x, h.data(), n * d);
    }
    if (layer_end == c.n_layer) lm_head(w_.head, w_.out_norm, c.rms_eps, b, x, d, logits, pool);
  }

 private:
  DecoderWeights w_;
  Rope rope_;
};

// A [n_rot/2] F32 tensor of RoPE frequency factors (each pair's angle is divided by its own), all finite and > 0.
Result<std::vector<float>> read_freq_factors(const GgufFile& f, const std::string& name, const ModelConfig& cfg) {
  const float* ff;
  AGENTKV_ASSIGN_OR_RETURN(ff, find_vector(f, name, cfg.n_rot / 2));
  std::vector<float> out(ff, ff + cfg.n_rot / 2);
  for (float v : out)
    if (!(v > 0) || !std::isfinite(v)) return make_error("tensor '" + name + "' holds a factor that is not finite and > 0");
  return out;
}

// LongRoPE: both factor sets must be there, with the original context they switch at; the set the
// model's context per sequence picks goes where Llama 3's rope_freqs.weight goes.
Status choose_longrope_factors(const GgufFile& f, ModelConfig& cfg) {
  if (cfg.rope_orig_ctx <= 0)
    return make_error("rope_factors_long/short.weight (LongRoPE) need key '" + cfg.arch +
                      ".rope.scaling.original_context_length' (> 0), which is missing");
  std::vector<float> lng, shrt;
  AGENTKV_ASSIGN_OR_RETURN(lng, read_freq_factors(f, "rope_factors_long.weight", cfg));
  AGENTKV_ASSIGN_OR_RETURN(shrt, read_freq_factors(f, "rope_factors_short.weight", cfg));
  cfg.rope_freq_factors = rope_uses_long_factors(cfg, cfg.n_ctx_seq) ? std::move(lng) : std::move(shrt);
  cfg.longrope = true;
  return {};
}

}  // namespace

Result<std::unique_ptr<Model>> load_gated_decoder(const GgufFile& f, ModelConfig cfg, GatedDecoderParts parts) {
  DecoderWeights w;
  AGENTKV_ASSIGN_OR_RETURN(w.embd, find_embedding(f, cfg));
  if (f.tensor("rope_factors_long.weight") || f.tensor("rope_factors_short.weight")) {
    if (!parts.phi3) return make_error("rope_factors_long/short.weight (LongRoPE) are read only for phi3 files");
    AGENTKV_TRY(choose_longrope_factors(f, cfg));
  } else if (f.tensor("rope_freqs.weight")) {
    AGENTKV_ASSIGN_OR_RETURN(cfg.rope_freq_factors, read_freq_factors(f, "rope_freqs.weight", cfg));
  }
  const int d = cfg.n_embd;
  std::vector<DecoderLayer>& layers = w.layers;
  layers.resize(size_t(cfg.n_layer));
  for (int il = 0; il < cfg.n_layer; ++il) {
    const std::string p = "blk." + std::to_string(il) + ".";
    DecoderLayer& L = layers[il];
    AGENTKV_ASSIGN_OR_RETURN(L.attn_norm, find_vector(f, p + "attn_norm.weight", d));
    if (parts.phi3 && f.tensor(p + "attn_qkv.weight")) {
      const int64_t q = cfg.q_dim(), kvd = cfg.kv_dim(), total = q + 2 * kvd;
      const std::string qkv = p + "attn_qkv.weight";
      AGENTKV_ASSIGN_OR_RETURN(L.attn.wq, find_matrix_rows(f, qkv, d, total, 0, q));
      AGENTKV_ASSIGN_OR_RETURN(L.attn.wk, find_matrix_rows(f, qkv, d, total, q, kvd));
      AGENTKV_ASSIGN_OR_RETURN(L.attn.wv, find_matrix_rows(f, qkv, d, total, q + kvd, kvd));
      AGENTKV_ASSIGN_OR_RETURN(L.attn.wo, find_matrix(f, p + "attn_output.weight", q, d));
    } else {
      AGENTKV_ASSIGN_OR_RETURN(L.attn, find_attention(f, p, cfg));
    }
    if (parts.phi3) L.extras.q_scale = 1.0f / std::sqrt(float(cfg.head_dim));
    if (parts.qkv_bias) {
      AGENTKV_ASSIGN_OR_RETURN(L.extras.bq, find_vector(f, p + "attn_q.bias", cfg.q_dim()));
      AGENTKV_ASSIGN_OR_RETURN(L.extras.bk, find_vector(f, p + "attn_k.bias", cfg.kv_dim()));
      AGENTKV_ASSIGN_OR_RETURN(L.extras.bv, find_vector(f, p + "attn_v.bias", cfg.kv_dim()));
    }
    if (parts.qk_norm) {
      AGENTKV_ASSIGN_OR_RETURN(L.extras.q_norm, find_vector(f, p + "attn_q_norm.weight", cfg.head_dim));
      AGENTKV_ASSIGN_OR_RETURN(L.extras.k_norm, find_vector(f, p + "attn_k_norm.weight", cfg.head_dim));
    }
    AGENTKV_ASSIGN_OR_RETURN(L.ffn_norm, find_vector(f, p + "ffn_norm.weight", d));
    if (parts.phi3) {
      const std::string up = p + "ffn_up.weight";
      AGENTKV_ASSIGN_OR_RETURN(L.ffn.gate, find_matrix_rows(f, up, d, 2 * int64_t(cfg.n_ff), 0, cfg.n_ff));
      AGENTKV_ASSIGN_OR_RETURN(L.ffn.up, find_matrix_rows(f, up, d, 2 * int64_t(cfg.n_ff), cfg.n_ff, cfg.n_ff));
      AGENTKV_ASSIGN_OR_RETURN(L.ffn.down, find_matrix(f, p + "ffn_down.weight", cfg.n_ff, d));
    } else {
      AGENTKV_ASSIGN_OR_RETURN(L.ffn, find_ffn(f, p, cfg));
    }
  }
  AGENTKV_ASSIGN_OR_RETURN(w.out_norm, find_vector(f, "output_norm.weight", d));
  if (f.tensor("output.weight")) {
    AGENTKV_ASSIGN_OR_RETURN(w.head, find_matrix(f, "output.weight", d, cfg.n_vocab));
  } else {
    w.head = w.embd;  // tied embeddings
  }
  return std::unique_ptr<Model>(new GatedDecoder(std::move(cfg), std::move(w)));
}

}  // namespace agentkv
