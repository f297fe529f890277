#include "model/model.h"

#include <vector>

#include "gguf/gguf_file.h"
#include "model/architectures.h"
#include "model/lora_adapters.h"

namespace agentkv {

Status Model::forward(const Batch& b, const KvArena& kv, float* logits, ThreadPool& pool) const {
  std::vector<float> hidden(b.tokens.size() * size_t(cfg_.n_embd));
  return forward_layers(b, kv, 0, cfg_.n_layer, hidden.data(), logits, pool);
}

Status Model::forward_layers(const Batch& b, const KvArena& kv, int layer_begin, int layer_end, float* hidden,
                             float* logits, ThreadPool& pool) const {
  if (layer_begin < 0 || layer_begin >= layer_end || layer_end > cfg_.n_layer)
    return make_error("forward: layer range [" + std::to_string(layer_begin) + ", " + std::to_string(layer_end) +
                      ") is empty or outside [0, " + std::to_string(cfg_.n_layer) + ")");
  if (hidden == nullptr) return make_error("forward: no hidden-state buffer");
  if (layer_end == cfg_.n_layer && !b.logit_rows.empty() && logits == nullptr)
    return make_error("forward: logit rows requested but no logits buffer");
  const size_t n = b.tokens.size();
  if (n == 0) return make_error("forward: empty batch");
  if (b.positions.size() != n || b.seq.size() != n || b.slots.size() != n)
    return make_error("forward: batch arrays have different lengths");
  if (kv.n_layer() != cfg_.n_layer || kv.kv_dim() != cfg_.kv_dim())
    return make_error("forward: KV arena was made for another model geometry");
  for (size_t i = 0; i < n; ++i) {
    if (b.tokens[i] < 0 || b.tokens[i] >= cfg_.n_vocab)
      return make_error("forward: token id " + std::to_string(b.tokens[i]) + " out of range [0, " +
                        std::to_string(cfg_.n_vocab) + ")");
    if (b.seq[i] < 0 || size_t(b.seq[i]) >= b.seqs.size())
      return make_error("forward: token " + std::to_string(i) + " names an unknown sequence");
    const SeqBlocks& s = b.seqs[b.seq[i]];
    if (b.slots[i] < 0 || int64_t(b.slots[i]) >= int64_t(s.n_blocks) * kv.block_size())
      return make_error("forward: slot " + std::to_string(b.slots[i]) + " outside the sequence's blocks");
  }
  if (!b.contexts.empty() && b.contexts.size() != b.seqs.size())
    return make_error("forward: batch contexts are not one per sequence");
  for (size_t k = 0; k < b.seqs.size(); ++k) {
    // A sequence read through its context may have holes (-1) where the context reads elsewhere.
    const bool holes_ok = !b.contexts.empty() && b.contexts[k] != nullptr;
    const SeqBlocks& s = b.seqs[k];
    for (int32_t j = 0; j < s.n_blocks; ++j)
      if ((s.table[j] < 0 && !(holes_ok && s.table[j] == -1)) || s.table[j] >= kv.n_blocks())
        return make_error("forward: block id " + std::to_string(s.table[j]) + " outside the arena");
  }
  for (size_t i = 0; i < n; ++i)
    if (b.seqs[b.seq[i]].table[b.slots[i] / kv.block_size()] < 0)
      return make_error("forward: token " + std::to_string(i) + "'s slot is in a hole of its sequence");
  for (int32_t r : b.logit_rows)
    if (r < 0 || size_t(r) >= n) return make_error("forward: logit row outside the batch");
  if (b.n_tile_tokens > int64_t(n)) return make_error("forward: n_tile_tokens exceeds the batch");
  if (b.n_tile_tokens >= 0)
    for (size_t i = 1; i < b.logit_rows.size(); ++i)
      if (b.logit_rows[i - 1] >= b.n_tile_tokens && b.logit_rows[i] < b.n_tile_tokens)
        return make_error("forward: logit rows of tile tokens must precede the others");
  if (b.adapters && !b.adapters->fits(cfg_)) return make_error("forward: the adapters were made for another model geometry");
  forward_layers_validated(b, kv, layer_begin, layer_end, hidden, logits, pool);
  return {};
}

Result<std::unique_ptr<Model>> create_model(const GgufFile& file, const ModelOptions& opt) {
  if (opt.n_ctx < 0) return make_error("model context per sequence must be >= 0");
  auto cfg = read_model_config(file);
  if (!cfg.ok()) return cfg.status_error();
  if (opt.n_ctx > 0) cfg->n_ctx_seq = opt.n_ctx;
  if (cfg->arch == "llama") return create_llama_model(file, std::move(*cfg));
  if (cfg->arch == "gemma3") return create_gemma3_model(file, std::move(*cfg));
  if (cfg->arch == "qwen2") return create_qwen2_model(file, std::move(*cfg));
  if (cfg->arch == "qwen3") return create_qwen3_model(file, std::move(*cfg));
  if (cfg->arch == "phi3") return create_phi3_model(file, std::move(*cfg));
  if (cfg->arch == "gemma2") return create_gemma2_model(file, std::move(*cfg));
  return make_error("unsupported architecture '" + cfg->arch +
                    "' (supported: llama, gemma3, qwen2, qwen3, phi3, gemma2)");
}

}  // namespace agentkv
