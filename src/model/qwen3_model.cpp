// Architecture "qwen3" (Qwen3 dense): the gated decoder without biases, each head's Q and K RMS-normed
// before RoPE (attn_q_norm / attn_k_norm, head_dim wide), RoPE on half-split pairs; head_dim comes
// from attention.key_length (it is not n_embd / n_head in Qwen3).
#include "model/architectures.h"
#include "model/gated_decoder.h"

namespace agentkv {

Result<std::unique_ptr<Model>> create_qwen3_model(const GgufFile& f, ModelConfig cfg) {
  cfg.rope_style = RopeStyle::kNeox;
  return load_gated_decoder(f, std::move(cfg), GatedDecoderParts{.qk_norm = true});
}

}  // namespace agentkv
