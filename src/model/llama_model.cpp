// Architecture "llama" (SmolLM2): pre-norm blocks, GQA attention with RoPE on consecutive pairs
// (the GGUF converter permuted Q/K for this), SiLU-gated FFN, optional tied LM head.
#include <cmath>
#include <vector>

#include "gguf/gguf_file.h"
#include "model/architectures.h"
#include "model/transformer_parts.h"
#include "ops/norm.h"
#include "ops/rope.h"

namespace agentkv {

namespace {

struct LlamaLayer {
  const float* attn_norm;
  AttentionWeights attn;
  const float* ffn_norm;
  FfnWeights ffn;
};

class LlamaModel final : public Model {
 public:
  LlamaModel(ModelConfig cfg, std::vector<LlamaLayer> layers, WeightView embd, WeightView head,
             const float* out_norm)
      : Model(std::move(cfg)),
        layers_(std::move(layers)),
        embd_(embd),
        head_(head),
        out_norm_(out_norm),
        rope_(cfg_.head_dim, cfg_.n_rot, cfg_.rope_base, RopeStyle::kNorm) {}

  const Rope& layer_rope(int) const override { return rope_; }

 protected:
  void forward_layers_validated(const Batch& b, const KvArena& kv, int layer_begin, int layer_end, float* x,
                                float* logits, ThreadPool& pool) const override {
    const ModelConfig& c = cfg_;
    const int64_t n = b.size();
    const int d = c.n_embd;
    std::vector<float> h(n * d), q(n * c.q_dim()), k(n * c.kv_dim()), v(n * c.kv_dim()),
        att(n * c.q_dim()), gate(n * c.n_ff), up(n * c.n_ff);
    if (layer_begin == 0) embed_tokens(embd_, b, 1.0f, x, pool);
    const float kq_scale = 1.0f / std::sqrt(float(c.head_dim));
    for (int il = layer_begin; il < layer_end; ++il) {
      const LlamaLayer& L = layers_[il];
      norm_rows(x, L.attn_norm, h.data(), n, d, c.rms_eps, pool);
      matmul(L.attn.wq, h.data(), n, q.data(), pool, b.n_tile_tokens);
      matmul(L.attn.wk, h.data(), n, k.data(), pool, b.n_tile_tokens);
      matmul(L.attn.wv, h.data(), n, v.data(), pool, b.n_tile_tokens);
      pool.parallel_for(n, 8, [&](int64_t t0, int64_t t1) {
        for (int64_t t = t0; t < t1; ++t) {
          rope_.apply(&q[t * c.q_dim()], c.n_head, b.positions[t]);
          rope_.apply(&k[t * c.kv_dim()], c.n_head_kv, b.positions[t]);
        }
      });
      write_kv(b, kv, il, k.data(), v.data());
      attention(c, b, kv, il, q.data(), 0, kq_scale, att.data(), pool);
      matmul(L.attn.wo, att.data(), n, h.data(), pool, b.n_tile_tokens);
      add_inplace(x, h.data(), n * d);

      norm_rows(x, L.ffn_norm, h.data(), n, d, c.rms_eps, pool);
      matmul(L.ffn.gate, h.data(), n, gate.data(), pool, b.n_tile_tokens);
      matmul(L.ffn.up, h.data(), n, up.data(), pool, b.n_tile_tokens);
      silu_mul(gate.data(), up.data(), n * c.n_ff);
      matmul(L.ffn.down, gate.data(), n, h.data(), pool, b.n_tile_tokens);
      add_inplace(x, h.data(), n * d);
    }
    if (layer_end == c.n_layer) lm_head(head_, out_norm_, c.rms_eps, b, x, d, logits, pool);
  }

 private:
  std::vector<LlamaLayer> layers_;
  WeightView embd_, head_;
  const float* out_norm_;
  Rope rope_;
};

}  // namespace

Result<std::unique_ptr<Model>> create_llama_model(const GgufFile& f, ModelConfig cfg) {
  WeightView embd;
  AGENTKV_ASSIGN_OR_RETURN(embd, find_embedding(f, cfg));
  const int d = cfg.n_embd;
  std::vector<LlamaLayer> layers(cfg.n_layer);
  for (int il = 0; il < cfg.n_layer; ++il) {
    const std::string p = "blk." + std::to_string(il) + ".";
    LlamaLayer& L = layers[il];
    AGENTKV_ASSIGN_OR_RETURN(L.attn_norm, find_vector(f, p + "attn_norm.weight", d));
    AGENTKV_ASSIGN_OR_RETURN(L.attn, find_attention(f, p, cfg));
    AGENTKV_ASSIGN_OR_RETURN(L.ffn_norm, find_vector(f, p + "ffn_norm.weight", d));
    AGENTKV_ASSIGN_OR_RETURN(L.ffn, find_ffn(f, p, cfg));
  }
  WeightView head;
  const float* out_norm;
  AGENTKV_ASSIGN_OR_RETURN(out_norm, find_vector(f, "output_norm.weight", d));
  if (f.tensor("output.weight")) {
    AGENTKV_ASSIGN_OR_RETURN(head, find_matrix(f, "output.weight", d, cfg.n_vocab));
  } else {
    head = embd;  // tied embeddings
  }
  return std::unique_ptr<Model>(new LlamaModel(std::move(cfg), std::move(layers), embd, head, out_norm));
}

}  // namespace agentkv
