// Architecture "gemma2": the Gemma decoder with attention scores and final logits soft-capped
// (cap * tanh(x / cap); attn_logit_softcapping 50 and final_logit_softcapping 30 unless the file says
// otherwise), local and global layers alternating (a sliding window of 4096 by default), and Q scaled
// after RoPE by 1/sqrt(head_dim) (1/sqrt(n_embd / n_head) for the 46-layer 27B), as llama.cpp's gemma2.
#include <cmath>

#include "gguf/gguf_file.h"
#include "model/architectures.h"
#include "model/gemma_decoder.h"

namespace agentkv {

Result<std::unique_ptr<Model>> create_gemma2_model(const GgufFile& f, ModelConfig cfg) {
  AGENTKV_ASSIGN_OR_RETURN(cfg.attn_softcap, read_positive_float(f, "gemma2.attn_logit_softcapping", 50.0, 1e6));
  AGENTKV_ASSIGN_OR_RETURN(cfg.final_softcap, read_positive_float(f, "gemma2.final_logit_softcapping", 30.0, 1e6));
  const float q_scale = cfg.n_layer == 46 ? 1.0f / std::sqrt(float(cfg.n_embd / cfg.n_head))
                                          : 1.0f / std::sqrt(float(cfg.head_dim));
  return load_gemma_decoder(f, std::move(cfg),
                            GemmaParts{.qk_norm = false, .swa_pattern = 2, .default_swa_base = 0,
                                       .default_sliding_window = 4096, .q_scale = q_scale});
}

}  // namespace agentkv
