// Architecture "phi3" (Phi-3 mini/medium 4k): the gated decoder with Q, K and V in one fused
// attn_qkv tensor and the gate and up projections in one ffn_up tensor (read as row slices, no copy),
// RoPE on half-split pairs, Q scaled before attention as llama.cpp does. The sliding window some files
// declare is ignored, as llama.cpp ignores it for phi3; LongRoPE factors (128k, Phi-3.5) are refused.
#include "model/architectures.h"
#include "model/gated_decoder.h"

namespace agentkv {

Result<std::unique_ptr<Model>> create_phi3_model(const GgufFile& f, ModelConfig cfg) {
  cfg.rope_style = RopeStyle::kNeox;
  cfg.sliding_window = 0;
  return load_gated_decoder(f, std::move(cfg), GatedDecoderParts{.phi3 = true});
}

}  // namespace agentkv
