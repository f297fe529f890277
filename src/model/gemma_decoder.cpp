#include "model/gemma_decoder.h"

#include <cmath>
#include <vector>

#include "gguf/gguf_file.h"
#include "model/transformer_parts.h"
#include "ops/norm.h"
#include "ops/rope.h"

namespace agentkv {

namespace {

class GemmaDecoder final : public Model {
 public:
  GemmaDecoder(ModelConfig cfg, DecoderWeights w)
      : Model(std::move(cfg)),
        w_(std::move(w)),
        rope_global_(cfg_.head_dim, cfg_.n_rot, cfg_.rope_base, RopeStyle::kNeox, cfg_.rope_freq_factors,
                     cfg_.rope_freq_scale),
        rope_local_(cfg_.head_dim, cfg_.n_rot, cfg_.rope_base_swa, RopeStyle::kNeox, cfg_.rope_freq_factors,
                    cfg_.rope_freq_scale) {}

  const Rope& layer_rope(int il) const override { return cfg_.layer_is_swa[il] ? rope_local_ : rope_global_; }
  const DecoderWeights& weights() const override { return w_; }

 protected:
  void forward_layers_validated(const Batch& b, const KvArena& kv, int layer_begin, int layer_end, float* x,
                                float* logits, ThreadPool& pool) const override {
    const ModelConfig& c = cfg_;
    const int64_t n = b.size();
    const int d = c.n_embd;
    std::vector<float> h(n * d), gate(n * c.n_ff), up(n * c.n_ff);
    AttentionScratch scratch(c, n);
    if (layer_begin == 0) embed_tokens(w_.embd, b, w_.embd_scale, x, pool);
    auto norm = [&](const float* src, const float* w, float* dst) { norm_rows(src, w, dst, n, d, c.rms_eps, pool); };
    for (int il = layer_begin; il < layer_end; ++il) {
      const DecoderLayer& L = w_.layers[il];
      norm(x, L.attn_norm, h.data());
      attention_block(c, b, kv, il, L.attn, L.extras, layer_rope(il),
                      layer_window(c, il), h.data(), h.data(), scratch, pool);
      norm(h.data(), L.post_attn_norm, h.data());
      add_inplace(x, h.data(), n * d);

      norm(x, L.ffn_norm, h.data());
      project(L.ffn.gate, b, il, LoraProj::kGate, h.data(), gate.data(), pool);
      project(L.ffn.up, b, il, LoraProj::kUp, h.data(), up.data(), pool);
      gelu_tanh_mul(gate.data(), up.data(), n * c.n_ff);
      project(L.ffn.down, b, il, LoraProj::kDown, gate.data(), h.data(), pool);
      norm(h.data(), L.post_ffn_norm, h.data());
      add_inplace(x, h.data(), n * d);
    }
    if (layer_end == c.n_layer) lm_head(w_.head, w_.out_norm, c.rms_eps, b, x, d, logits, pool, c.final_softcap);
  }

 private:
  DecoderWeights w_;
  Rope rope_global_, rope_local_;
};

}  // namespace

Result<std::unique_ptr<Model>> load_gemma_decoder(const GgufFile& f, ModelConfig cfg, const GemmaParts& parts) {
  DecoderWeights w;
  AGENTKV_ASSIGN_OR_RETURN(w.embd, find_embedding(f, cfg));
  w.head = w.embd;  // tied
  w.embd_scale = std::sqrt(float(cfg.n_embd));
  w.activation = FfnActivation::kGeluTanh;
  AGENTKV_ASSIGN_OR_RETURN(cfg.rope_base_swa,
                           read_positive_float(f, cfg.arch + ".rope.freq_base_swa",
                                               parts.default_swa_base > 0 ? parts.default_swa_base : cfg.rope_base, 1e30));
  cfg.rope_style = RopeStyle::kNeox;
  if (cfg.rope_freq_scale != 1.0f) return make_error(cfg.arch + ": rope.scaling is not supported yet");
  if (cfg.sliding_window == 0) cfg.sliding_window = parts.default_sliding_window;
  if (cfg.sliding_window > 0)
    for (int il = 0; il < cfg.n_layer; ++il) cfg.layer_is_swa[il] = (il % parts.swa_pattern) < parts.swa_pattern - 1;
  const int d = cfg.n_embd;
  const int hd = cfg.head_dim;
  w.layers.resize(size_t(cfg.n_layer));
  for (int il = 0; il < cfg.n_layer; ++il) {
    const std::string p = "blk." + std::to_string(il) + ".";
    DecoderLayer& L = w.layers[il];
    AGENTKV_ASSIGN_OR_RETURN(L.attn_norm, find_vector(f, p + "attn_norm.weight", d));
    AGENTKV_ASSIGN_OR_RETURN(L.attn, find_attention(f, p, cfg));
    if (parts.qk_norm) {
      AGENTKV_ASSIGN_OR_RETURN(L.extras.q_norm, find_vector(f, p + "attn_q_norm.weight", hd));
      AGENTKV_ASSIGN_OR_RETURN(L.extras.k_norm, find_vector(f, p + "attn_k_norm.weight", hd));
    }
    L.extras.q_scale = parts.q_scale;
    AGENTKV_ASSIGN_OR_RETURN(L.post_attn_norm, find_vector(f, p + "post_attention_norm.weight", d));
    AGENTKV_ASSIGN_OR_RETURN(L.ffn_norm, find_vector(f, p + "ffn_norm.weight", d));
    AGENTKV_ASSIGN_OR_RETURN(L.ffn, find_ffn(f, p, cfg));
    AGENTKV_ASSIGN_OR_RETURN(L.post_ffn_norm, find_vector(f, p + "post_ffw_norm.weight", d));
  }
  AGENTKV_ASSIGN_OR_RETURN(w.out_norm, find_vector(f, "output_norm.weight", d));
  return std::unique_ptr<Model>(new GemmaDecoder(std::move(cfg), std::move(w)));
}

}  // namespace agentkv
