// Hyperparameters of a decoder-only transformer, read from GGUF metadata only.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ops/rope.h"
#include "util/status.h"

namespace agentkv {

class GgufFile;

struct ModelConfig {
  std::string arch;      // general.architecture
  std::string name;      // general.name (informational)
  int n_layer = 0;
  int n_embd = 0;
  int n_ff = 0;
  int n_head = 0;
  int n_head_kv = 0;
  int head_dim = 0;      // key_length == value_length for both supported architectures
  int n_rot = 0;
  int n_vocab = 0;
  int n_ctx_train = 0;
  float rms_eps = 1e-5f;
  float rope_base = 10000.0f;
  float rope_base_swa = 10000.0f;   // local (sliding-window) layers of gemma3
  RopeStyle rope_style = RopeStyle::kNorm;  // set by the architecture
  std::vector<float> rope_freq_factors;     // rope_freqs.weight (Llama 3.x), LongRoPE's chosen set, or empty
  float rope_freq_scale = 1.0f;             // 1 / {arch}.rope.scaling.factor for "linear" scaling
  float rope_attn_factor = 1.0f;            // {arch}.rope.scaling.attn_factor: scales RoPE's cos and sin
  int rope_orig_ctx = 0;                    // {arch}.rope.scaling.original_context_length; 0: absent
  // LongRoPE (Phi-3 128k, Phi-3.5: rope_factors_long/short.weight): rope_freq_factors holds the long
  // set when n_ctx_seq exceeds rope_orig_ctx, else the short one (rope_uses_long_factors).
  bool longrope = false;
  int n_ctx_seq = 0;                        // the context per sequence the model was created for
  int sliding_window = 0;           // 0: none
  float attn_softcap = 0.0f;        // Gemma 2: scores -> cap * tanh(score / cap); 0: none
  float final_softcap = 0.0f;       // Gemma 2: logits -> cap * tanh(logit / cap); 0: none
  std::vector<uint8_t> layer_is_swa;  // per layer: 1 if sliding-window attention

  int q_dim() const { return n_head * head_dim; }
  int kv_dim() const { return n_head_kv * head_dim; }
};

// Layer il's RoPE (its base, style, frequency factors and scale): the one rotation its cached K carries.
Rope layer_rope(const ModelConfig& cfg, int il);

// What the caller fixes when it creates a model, beyond the file.
struct ModelOptions {
  // The context per sequence the model will run under (an engine's n_ctx); 0: the file's training
  // context (what `serve` gives each sequence). Only LongRoPE files depend on it.
  int n_ctx = 0;
};

// llama.cpp's rule (llama_model::get_rope_factors): LongRoPE's long factors when the context per
// sequence exceeds the original (pre-extension) context, the short ones otherwise.
inline bool rope_uses_long_factors(const ModelConfig& cfg, int n_ctx_seq) { return n_ctx_seq > cfg.rope_orig_ctx; }

// Reads the common keys ({arch}.block_count, …); a missing required key is an error naming it.
Result<ModelConfig> read_model_config(const GgufFile& file);

// A float hyperparameter that must be finite and in (0, hi] (an epsilon, a RoPE base): absent, it
// is `dflt`, or an error naming the key when there is none; NaN, inf, 0 or negative is an error naming it.
Result<float> read_positive_float(const GgufFile& file, const std::string& key, std::optional<double> dflt, double hi);

}  // namespace agentkv
