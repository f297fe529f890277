// Architecture "phi3" (Phi-3 mini/medium 4k and 128k, Phi-3.5 mini): the gated decoder with Q, K and V
// in one fused attn_qkv tensor and the gate and up projections in one ffn_up tensor (read as row
// slices, no copy), RoPE on half-split pairs, Q scaled before attention as llama.cpp does. The sliding
// window some files declare is ignored, as llama.cpp ignores it for phi3.
// LongRoPE (128k, Phi-3.5: rope_factors_long/short.weight), as llama.cpp runs it: the long factors
// when the context per sequence exceeds phi3.rope.scaling.original_context_length (required), else the
// short ones; each pair's angle is divided by its factor, and cos and sin are multiplied by
// phi3.rope.scaling.attn_factor (1 when absent, as in llama.cpp; the converter writes
// sqrt(1 + ln(context / original) / ln(original))), so Q and K both carry it. The context per sequence
// is the one the model is created for (ModelOptions::n_ctx): the engine's n_ctx, which `serve` leaves
// at the training context (so a 128k file serves with its long factors) and `generate` and
// `perplexity` set from --ctx (generate's default: prompt + n); Engine::create refuses a model made for
// a context that picks the other set. llama.cpp rounds its context up to a multiple of 256 before the
// comparison; agentkv compares the context itself, the same choice whenever the original context is a
// multiple of 256 (4096 in every Phi-3 file).
#include "model/architectures.h"
#include "model/gated_decoder.h"

namespace agentkv {

Result<std::unique_ptr<Model>> create_phi3_model(const GgufFile& f, ModelConfig cfg) {
  cfg.rope_style = RopeStyle::kNeox;
  cfg.sliding_window = 0;
  return load_gated_decoder(f, std::move(cfg), GatedDecoderParts{.phi3 = true});
}

}  // namespace agentkv
