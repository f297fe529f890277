// Architecture "qwen2" (Qwen2, Qwen2.5, DeepSeek-R1-Distill-Qwen): the gated decoder with biases on
// the Q, K and V projections and RoPE on half-split pairs (llama.cpp's NEOX rotation for qwen2).
#include "model/architectures.h"
#include "model/gated_decoder.h"

namespace agentkv {

Result<std::unique_ptr<Model>> create_qwen2_model(const GgufFile& f, ModelConfig cfg) {
  cfg.rope_style = RopeStyle::kNeox;
  return load_gated_decoder(f, std::move(cfg), GatedDecoderParts{.qkv_bias = true});
}

}  // namespace agentkv
