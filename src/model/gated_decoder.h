// The pre-norm decoder several families share, one implementation: RMS norm, attention with RoPE
// (optionally with Q/K/V biases, as Qwen2 has, and a per-head RMS norm of Q and K before RoPE, as
// Qwen3 has), a SiLU-gated FFN, the final norm and the LM head (tied to the embedding or not).
// llama_model.cpp, qwen2_model.cpp and qwen3_model.cpp each read their file into it.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "model/model.h"
#include "model/transformer_parts.h"

namespace agentkv {

struct GatedDecoderParts {
  bool qkv_bias = false;  // blk.N.attn_{q,k,v}.bias
  bool qk_norm = false;   // blk.N.attn_{q,k}_norm.weight
  // Phi-3: blk.N.attn_qkv.weight (Q, K, V rows in that order) when the file has it, and
  // blk.N.ffn_up.weight holding the gate rows then the up rows; Q pre-scaled.
  bool phi3 = false;
};

// Reads every layer, the embedding, the final norm and the head (output.weight, or the embedding when
// the file has none), and rope_freqs.weight when present, or for phi3 LongRoPE's two factor sets (the
// one cfg.n_ctx_seq picks is used, phi3_model.cpp); a missing tensor or key is an error naming it.
Result<std::unique_ptr<Model>> load_gated_decoder(const GgufFile& f, ModelConfig cfg, GatedDecoderParts parts);

}  // namespace agentkv
