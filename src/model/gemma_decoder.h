// The Gemma decoder, one implementation for Gemma 2 and Gemma 3: embeddings scaled by sqrt(n_embd),
// RoPE on half-split pairs, sandwich norms after attention and FFN, GELU(tanh)-gated FFN, sliding-window
// attention on all but every swa_pattern-th layer (with their own RoPE base), tied LM head. GGUF norm
// weights already include Gemma's (1 + w), so they are applied as plain scales. gemma3_model.cpp and
// gemma2_model.cpp read their files into it.
#pragma once

#include <memory>

#include "model/model.h"

namespace agentkv {

struct GemmaParts {
  bool qk_norm = false;              // Gemma 3: per-head RMS norm of Q and K before RoPE
  int swa_pattern = 6;               // every swa_pattern-th layer is global, the others local
  double default_swa_base = 10000;   // the local layers' RoPE base when the file has none (0: the global one)
  int default_sliding_window = 0;    // when the file has no attention.sliding_window
  float q_scale = 0.0f;              // > 0: Q scaled after RoPE, scores unscaled (Gemma 2)
};

Result<std::unique_ptr<Model>> load_gemma_decoder(const GgufFile& f, ModelConfig cfg, const GemmaParts& parts);

}  // namespace agentkv
