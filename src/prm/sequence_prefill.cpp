#include "prm/sequence_prefill.h"

#include <algorithm>

namespace agentkv::prm {

Status prefill_together(const Model& model, KvManager& kv, std::span<KvSequence* const> seqs,
                        std::span<const std::span<const int32_t>> tokens, ThreadPool& pool,
                        std::vector<float>* last_logits) {
  AGENTKV_CHECK(seqs.size() == tokens.size());
  Batch batch;
  for (size_t s = 0; s < seqs.size(); ++s) {
    const size_t n = tokens[s].size();
    if (n == 0) continue;
    if (!seqs[s]->reserve(int64_t(n)))
      return make_error("prefill: the KV pool has no room for " + std::to_string(n) + " more tokens");
  }
  // Block tables are final once every sequence has reserved: the batch may point into them.
  for (size_t s = 0; s < seqs.size(); ++s) {
    const size_t n = tokens[s].size();
    if (n == 0) continue;
    const int32_t seq_index = int32_t(batch.seqs.size());
    batch.seqs.push_back(SeqBlocks{seqs[s]->blocks().data(), int32_t(seqs[s]->blocks().size())});
    const int32_t base = int32_t(seqs[s]->n_tokens());
    // Only the last token's logits are ever needed; one row per sequence keeps the LM head cheap.
    for (size_t i = 0; i < n; ++i)
      batch.add(tokens[s][i], base + int32_t(i), seq_index, base + int32_t(i), last_logits && i + 1 == n);
  }
  if (batch.size() == 0) return make_error("prefill: no tokens");
  batch.n_tile_tokens = 0;
  std::vector<float> none;
  std::vector<float>& out = last_logits ? *last_logits : none;
  out.resize(batch.logit_rows.size() * size_t(model.config().n_vocab));
  if (Status st = model.forward(batch, kv.arena(), out.data(), pool); !st.ok()) return st;
  for (size_t s = 0; s < seqs.size(); ++s)
    if (!tokens[s].empty()) seqs[s]->commit(tokens[s]);
  return {};
}

Status prefill_sequence(const Model& model, KvManager& kv, KvSequence& seq, std::span<const int32_t> tokens,
                        ThreadPool& pool, std::vector<float>* last_logits, int chunk) {
  if (tokens.empty()) return make_error("prefill: no tokens");
  AGENTKV_CHECK(chunk > 0);
  KvSequence* one[] = {&seq};
  for (size_t start = 0; start < tokens.size(); start += size_t(chunk)) {
    const size_t n = std::min(tokens.size() - start, size_t(chunk));
    const std::span<const int32_t> part[] = {tokens.subspan(start, n)};
    const bool last = start + n == tokens.size();
    if (Status st = prefill_together(model, kv, one, part, pool, last ? last_logits : nullptr); !st.ok()) return st;
  }
  return {};
}

}  // namespace agentkv::prm
