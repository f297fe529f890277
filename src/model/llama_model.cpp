// Architecture "llama" (SmolLM2, Llama 2/3.x, Mistral-style files): the gated decoder with RoPE on
// consecutive pairs (the GGUF converter permuted Q/K for it), Llama 3.x frequency scaling when the
// file carries rope_freqs.weight, optional tied LM head.
#include "model/architectures.h"
#include "model/gated_decoder.h"

namespace agentkv {

Result<std::unique_ptr<Model>> create_llama_model(const GgufFile& f, ModelConfig cfg) {
  cfg.rope_style = RopeStyle::kNorm;
  return load_gated_decoder(f, std::move(cfg), GatedDecoderParts{});
}

}  // namespace agentkv
