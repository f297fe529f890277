#include "prm/sequence_prefill.h"

#include <algorithm>
#include <cstring>

#include "prm/step_probe.h"

namespace agentkv::prm {

Status forward_rows(const Model& model, const Batch& batch, const KvArena& arena, ThreadPool& pool,
                    const RowOutputs& out) {
  const ModelConfig& c = model.config();
  const int end = out.layer_end > 0 ? out.layer_end : c.n_layer;
  if (end > c.n_layer) return make_error("layer_end " + std::to_string(end) + " exceeds " + std::to_string(c.n_layer));
  AGENTKV_CHECK(end == c.n_layer || !out.logits);
  const size_t rows = batch.logit_rows.size();
  std::vector<float> none;
  std::vector<float>& logits = out.logits ? *out.logits : none;
  logits.resize(end == c.n_layer ? rows * size_t(c.n_vocab) : 0);  // the full pass always writes them
  if (!out.features && !out.every_layer && end == c.n_layer) return model.forward(batch, arena, logits.data(), pool);
  if (out.features && (out.feature_layer < 1 || out.feature_layer > end))
    return make_error("feature layer " + std::to_string(out.feature_layer) + " is outside 1.." + std::to_string(end));
  const size_t d = size_t(c.n_embd);
  std::vector<float> hidden(size_t(batch.size()) * d);
  auto copy_rows = [&](float* dst, size_t stride) {
    for (size_t r = 0; r < rows; ++r) {
      std::memcpy(dst + r * stride, hidden.data() + size_t(batch.logit_rows[r]) * d, d * sizeof(float));
      rms_normalize_rows(dst + r * stride, 1, int64_t(d), c.rms_eps);
    }
  };
  if (out.every_layer) {
    AGENTKV_CHECK(end == c.n_layer);
    out.every_layer->resize(rows * size_t(c.n_layer) * d);
    for (int l = 0; l < c.n_layer; ++l) {
      if (Status st = model.forward_layers(batch, arena, l, l + 1, hidden.data(),
                                           l + 1 == c.n_layer ? logits.data() : nullptr, pool);
          !st.ok())
        return st;
      copy_rows(out.every_layer->data() + size_t(l) * d, size_t(c.n_layer) * d);
      if (out.features && l + 1 == out.feature_layer) copy_rows((out.features->resize(rows * d), out.features->data()), d);
    }
    return {};
  }
  // Split after the feature layer to read the residual stream there (a split pass is bit-identical
  // to a whole one); a pass without logits stops at layer_end.
  const int split = out.features ? out.feature_layer : end;
  float* const no_logits = nullptr;
  if (Status st = model.forward_layers(batch, arena, 0, split, hidden.data(),
                                       split == c.n_layer ? logits.data() : no_logits, pool);
      !st.ok())
    return st;
  if (out.features) {
    out.features->resize(rows * d);
    copy_rows(out.features->data(), d);
  }
  if (split == end) return {};
  return model.forward_layers(batch, arena, split, end, hidden.data(), end == c.n_layer ? logits.data() : no_logits,
                              pool);
}

Status prefill_together(const Model& model, KvManager& kv, std::span<KvSequence* const> seqs,
                        std::span<const std::span<const int32_t>> tokens, ThreadPool& pool,
                        std::vector<float>* last_logits) {
  return prefill_together(model, kv, seqs, tokens, pool, RowOutputs{last_logits});
}

Status prefill_together(const Model& model, KvManager& kv, std::span<KvSequence* const> seqs,
                        std::span<const std::span<const int32_t>> tokens, ThreadPool& pool, const RowOutputs& out) {
  AGENTKV_CHECK(seqs.size() == tokens.size());
  Batch batch;
  for (size_t s = 0; s < seqs.size(); ++s) {
    const size_t n = tokens[s].size();
    if (n == 0) continue;
    if (!seqs[s]->reserve(int64_t(n)))
      return make_error("prefill: the KV pool has no room for " + std::to_string(n) + " more tokens");
  }
  const bool want_rows = out.logits || out.features;  // one row per sequence: its last token
  // Block tables are final once every sequence has reserved: the batch may point into them.
  for (size_t s = 0; s < seqs.size(); ++s) {
    const size_t n = tokens[s].size();
    if (n == 0) continue;
    const int32_t seq_index = int32_t(batch.seqs.size());
    batch.seqs.push_back(SeqBlocks{seqs[s]->blocks().data(), int32_t(seqs[s]->blocks().size())});
    const int32_t base = int32_t(seqs[s]->n_tokens());
    // Only the last token's row is ever needed; one row per sequence keeps the LM head cheap.
    for (size_t i = 0; i < n; ++i)
      batch.add(tokens[s][i], base + int32_t(i), seq_index, base + int32_t(i), want_rows && i + 1 == n);
  }
  if (batch.size() == 0) return make_error("prefill: no tokens");
  batch.n_tile_tokens = 0;
  if (Status st = forward_rows(model, batch, kv.arena(), pool, out); !st.ok()) return st;
  for (size_t s = 0; s < seqs.size(); ++s)
    if (!tokens[s].empty()) seqs[s]->commit(tokens[s]);
  return {};
}

Result<std::vector<KvSequence>> prefill_new(const Model& model, KvManager& kv,
                                            std::span<const std::span<const int32_t>> tokens, ThreadPool& pool,
                                            const RowOutputs& out) {
  std::vector<KvSequence> seqs;
  seqs.reserve(tokens.size());  // the pointers below must stay valid
  std::vector<KvSequence*> ptrs;
  for (size_t i = 0; i < tokens.size(); ++i) {
    seqs.emplace_back(kv);
    ptrs.push_back(&seqs.back());
  }
  if (Status st = prefill_together(model, kv, ptrs, tokens, pool, out); !st.ok()) return st.status_error();
  return seqs;
}

Status prefill_sequence(const Model& model, KvManager& kv, KvSequence& seq, std::span<const int32_t> tokens,
                        ThreadPool& pool, std::vector<float>* last_logits, int chunk) {
  return prefill_sequence(model, kv, seq, tokens, pool, RowOutputs{last_logits}, chunk);
}

Status prefill_sequence(const Model& model, KvManager& kv, KvSequence& seq, std::span<const int32_t> tokens,
                        ThreadPool& pool, const RowOutputs& out, int chunk) {
  if (tokens.empty()) return make_error("prefill: no tokens");
  AGENTKV_CHECK(chunk > 0);
  KvSequence* one[] = {&seq};
  for (size_t start = 0; start < tokens.size(); start += size_t(chunk)) {
    const size_t n = std::min(tokens.size() - start, size_t(chunk));
    const std::span<const int32_t> part[] = {tokens.subspan(start, n)};
    const bool last = start + n == tokens.size();
    const RowOutputs none{nullptr, nullptr, 0, out.layer_end};
    if (Status st = prefill_together(model, kv, one, part, pool, last ? out : none); !st.ok()) return st;
  }
  return {};
}

}  // namespace agentkv::prm
