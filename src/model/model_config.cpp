#include "model/model_config.h"

#include "gguf/gguf_file.h"

namespace agentkv {

namespace {

Result<int> required_int(const GgufFile& f, const std::string& key, int64_t lo, int64_t hi) {
  auto v = f.get_int(key);
  if (!v.ok()) return v.status_error();
  if (*v < lo || *v > hi)
    return make_error("key '" + key + "' = " + std::to_string(*v) + " out of range [" + std::to_string(lo) +
                      ", " + std::to_string(hi) + "]");
  return int(*v);
}

}  // namespace

Rope layer_rope(const ModelConfig& cfg, int il) {
  const bool swa = il >= 0 && il < int(cfg.layer_is_swa.size()) && cfg.layer_is_swa[size_t(il)];
  return Rope(cfg.head_dim, cfg.n_rot, swa ? cfg.rope_base_swa : cfg.rope_base, cfg.rope_style, cfg.rope_freq_factors,
              cfg.rope_freq_scale, cfg.rope_attn_factor);
}

Result<float> read_positive_float(const GgufFile& f, const std::string& key, std::optional<double> dflt, double hi) {
  double v = 0;
  if (dflt && !f.has(key)) {
    v = *dflt;
  } else {
    auto r = f.get_float(key);
    if (!r.ok()) return r.status_error();
    v = *r;
  }
  // `!(v > 0)` also catches NaN; the float the model keeps must itself be finite and non-zero.
  if (!(v > 0) || !(v <= hi) || !(float(v) > 0))
    return make_error("key '" + key + "' = " + std::to_string(v) + " is not a finite number in (0, " +
                      std::to_string(hi) + "]");
  return float(v);
}

Result<ModelConfig> read_model_config(const GgufFile& f) {
  ModelConfig c;
  auto arch = f.get_string("general.architecture");
  if (!arch.ok()) return arch.status_error();
  c.arch = *arch;
  c.name = f.get_string_or("general.name", "");
  const std::string p = c.arch + ".";
#define AGENTKV_REQ(field, key, lo, hi)                   \
  do {                                                   \
    auto r = required_int(f, p + key, lo, hi);           \
    if (!r.ok()) return r.status_error();                \
    c.field = *r;                                        \
  } while (0)
  AGENTKV_REQ(n_layer, "block_count", 1, 4096);
  AGENTKV_REQ(n_embd, "embedding_length", 1, 1 << 16);
  AGENTKV_REQ(n_ff, "feed_forward_length", 1, 1 << 18);
  AGENTKV_REQ(n_head, "attention.head_count", 1, 1024);
  AGENTKV_REQ(n_ctx_train, "context_length", 1, 1 << 24);
#undef AGENTKV_REQ
  c.n_head_kv = int(f.get_int_or(p + "attention.head_count_kv", c.n_head));
  if (c.n_head_kv < 1 || c.n_head % c.n_head_kv != 0)
    return make_error("key '" + p + "attention.head_count_kv' = " + std::to_string(c.n_head_kv) +
                      " does not divide head_count " + std::to_string(c.n_head));
  c.head_dim = int(f.get_int_or(p + "attention.key_length", c.n_embd / c.n_head));
  const int v_len = int(f.get_int_or(p + "attention.value_length", c.head_dim));
  if (c.head_dim < 2 || c.head_dim > 1024 || c.head_dim % 2 != 0)
    return make_error("key '" + p + "attention.key_length' = " + std::to_string(c.head_dim) + " unsupported");
  if (v_len != c.head_dim)
    return make_error("key '" + p + "attention.value_length' differs from key_length (unsupported)");
  c.n_rot = int(f.get_int_or(p + "rope.dimension_count", c.head_dim));
  if (c.n_rot < 2 || c.n_rot > c.head_dim || c.n_rot % 2 != 0)
    return make_error("key '" + p + "rope.dimension_count' = " + std::to_string(c.n_rot) + " unsupported");
  // A NaN epsilon turned every norm into NaN (and generation into 0 tokens); a base of 0 or inf
  // makes every RoPE angle NaN. Both are refused here, naming the key.
  AGENTKV_ASSIGN_OR_RETURN(c.rms_eps, read_positive_float(f, p + "attention.layer_norm_rms_epsilon", std::nullopt, 1.0));
  AGENTKV_ASSIGN_OR_RETURN(c.rope_base, read_positive_float(f, p + "rope.freq_base", 10000.0, 1e30));
  c.sliding_window = int(f.get_int_or(p + "attention.sliding_window", 0));
  if (c.sliding_window < 0) return make_error("key '" + p + "attention.sliding_window' is negative");
  c.layer_is_swa.assign(c.n_layer, 0);
  // RoPE scaling: none, or linear (positions divided by the factor). Others (yarn, ...) change more
  // than the angle and are refused, naming the type. (Phi-3's LongRoPE comes as tensors, with no type.)
  const std::string scaling = f.get_string_or(p + "rope.scaling.type", "none");
  if (scaling == "linear") {
    float factor = 1.0f;
    AGENTKV_ASSIGN_OR_RETURN(factor, read_positive_float(f, p + "rope.scaling.factor", 1.0, 1e6));
    c.rope_freq_scale = 1.0f / factor;
  } else if (scaling != "none") {
    return make_error("key '" + p + "rope.scaling.type' = '" + scaling +
                      "' is not supported (supported: none, linear; Llama 3's scaling comes as rope_freqs.weight)");
  }

  // llama.cpp multiplies every architecture's RoPE by this factor (1 when absent); Phi-3's converter
  // writes it for LongRoPE files: sqrt(1 + ln(context / original context) / ln(original context)).
  AGENTKV_ASSIGN_OR_RETURN(c.rope_attn_factor, read_positive_float(f, p + "rope.scaling.attn_factor", 1.0, 1e3));
  const int64_t orig_ctx = f.get_int_or(p + "rope.scaling.original_context_length", 0);
  if (orig_ctx < 0 || orig_ctx > (1 << 24))
    return make_error("key '" + p + "rope.scaling.original_context_length' = " + std::to_string(orig_ctx) +
                      " out of range [0, " + std::to_string(1 << 24) + "]");
  c.rope_orig_ctx = int(orig_ctx);
  c.n_ctx_seq = c.n_ctx_train;

  // n_vocab comes from the embedding tensor's shape (set by the architecture loader).
  return c;
}

}  // namespace agentkv
