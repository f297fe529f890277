// Direct prefill (direct_prefill.h): one batch builder over runs of tokens, one pass that reads
// logits and hidden states, and the append-and-commit calls built on them.
#include "kv/direct_prefill.h"

#include <algorithm>
#include <cstring>
#include <string>

namespace agentkv {
namespace {

// Where one pass writes its rows' outputs (null: not wanted).
struct RowDestinations {
  float* logits = nullptr;
  float* hidden = nullptr;
  float* every_layer = nullptr;
};

// One forward over the batch. The pass is split after block hidden_layer - 1 to read the residual
// stream there; a split pass is bit-identical to a whole one (Model::forward_layers).
Status forward_rows(const Model& model, const Batch& batch, const KvArena& arena, ThreadPool& pool,
                    const RowOutputs& out, int end, const RowDestinations& dst) {
  const ModelConfig& c = model.config();
  if (!dst.hidden && !dst.every_layer && end == c.n_layer) return model.forward(batch, arena, dst.logits, pool);
  const size_t rows = batch.logit_rows.size();
  const size_t d = size_t(c.n_embd);
  std::vector<float> hidden(size_t(batch.size()) * d);
  auto copy_rows = [&](float* to, size_t stride) {
    for (size_t r = 0; r < rows; ++r)
      std::memcpy(to + r * stride, hidden.data() + size_t(batch.logit_rows[r]) * d, d * sizeof(float));
  };
  if (dst.every_layer) {
    for (int l = 0; l < c.n_layer; ++l) {
      AGENTKV_TRY(model.forward_layers(batch, arena, l, l + 1, hidden.data(), l + 1 == c.n_layer ? dst.logits : nullptr,
                                       pool));
      copy_rows(dst.every_layer + size_t(l) * d, size_t(c.n_layer) * d);
      if (dst.hidden && l + 1 == out.hidden_layer) copy_rows(dst.hidden, d);
    }
    return {};
  }
  // Split after the hidden layer to read the residual stream there; a pass without logits stops at
  // layer_end.
  const int split = dst.hidden ? out.hidden_layer : end;
  AGENTKV_TRY(
      model.forward_layers(batch, arena, 0, split, hidden.data(), split == c.n_layer ? dst.logits : nullptr, pool));
  if (dst.hidden) copy_rows(dst.hidden, d);
  if (split == end) return {};
  return model.forward_layers(batch, arena, split, end, hidden.data(), end == c.n_layer ? dst.logits : nullptr, pool);
}

// Rows a run contributes: its tokens [from, n).
size_t first_row(const PrefillRun& run) {
  const size_t n = run.tokens.size();
  return run.rows_from < 0 ? n - 1 : std::min(n, size_t(run.rows_from));
}

Status reserve_all(std::span<KvSequence* const> seqs, std::span<const std::span<const int32_t>> tokens) {
  for (size_t s = 0; s < seqs.size(); ++s) {
    const size_t n = tokens[s].size();
    if (n > 0 && !seqs[s]->reserve(int64_t(n)))
      return make_error(ErrorCode::kResourceExhausted,
                        "prefill: the KV pool has no room for " + std::to_string(n) + " more tokens");
  }
  return {};
}

}  // namespace

Status write_runs(const Model& model, std::span<const PrefillRun> runs, ThreadPool& pool, const RowOutputs& out,
                  int64_t n_tile_tokens, int64_t chunk, const LoraAdapters* row_adapters) {
  const ModelConfig& c = model.config();
  const int end = out.layer_end > 0 ? out.layer_end : c.n_layer;
  if (end > c.n_layer) return make_error("layer_end " + std::to_string(end) + " exceeds " + std::to_string(c.n_layer));
  AGENTKV_CHECK(end == c.n_layer || !out.logits);
  AGENTKV_CHECK(!out.every_layer || end == c.n_layer);
  if (out.hidden && (out.hidden_layer < 1 || out.hidden_layer > end))
    return make_error("feature layer " + std::to_string(out.hidden_layer) + " is outside 1.." + std::to_string(end));
  const bool want_rows = out.logits || out.hidden || out.every_layer;
  const KvArena* arena = nullptr;
  size_t n_tokens = 0, n_rows = 0;
  for (const PrefillRun& run : runs) {
    AGENTKV_CHECK(run.seq);
    if (run.tokens.empty()) continue;
    const KvArena& a = run.seq->manager().arena();
    AGENTKV_CHECK(!arena || arena == &a);  // one model's KV per pass
    arena = &a;
    AGENTKV_CHECK(run.first >= 0 &&
                  run.first + int64_t(run.tokens.size()) <= int64_t(run.seq->blocks().size()) * a.block_size());
    n_tokens += run.tokens.size();
    if (want_rows) n_rows += run.tokens.size() - first_row(run);
  }
  if (n_tokens == 0) return make_error("prefill: no tokens");
  // A pass through the last block always writes logits for its rows: a scratch when none are wanted.
  std::vector<float> scratch;
  std::vector<float>& logits = out.logits ? *out.logits : scratch;
  const size_t v = size_t(c.n_vocab), d = size_t(c.n_embd), nl = size_t(c.n_layer);
  logits.resize(end == c.n_layer ? n_rows * v : 0);
  if (out.hidden) out.hidden->resize(n_rows * d);
  if (out.every_layer) out.every_layer->resize(n_rows * nl * d);

  const size_t max_pass = chunk > 0 ? size_t(chunk) : n_tokens;
  Batch batch;
  std::vector<const KvSequence*> in_batch;  // batch.seqs[i] is in_batch[i]'s block table
  size_t row = 0;                           // rows written by earlier passes
  auto flush = [&]() -> Status {
    if (batch.size() == 0) return {};
    batch.n_tile_tokens = n_tile_tokens;
    batch.adapters = row_adapters;
    const RowDestinations dst{end == c.n_layer ? logits.data() + row * v : nullptr,
                              out.hidden ? out.hidden->data() + row * d : nullptr,
                              out.every_layer ? out.every_layer->data() + row * nl * d : nullptr};
    AGENTKV_TRY(forward_rows(model, batch, *arena, pool, out, end, dst));
    row += batch.logit_rows.size();
    batch.clear();
    in_batch.clear();
    return {};
  };
  // The batch's index of seq's block table, added on first use.
  auto seq_index = [&](const KvSequence* seq) {
    const auto it = std::find(in_batch.begin(), in_batch.end(), seq);
    if (it != in_batch.end()) return int32_t(it - in_batch.begin());
    in_batch.push_back(seq);
    batch.seqs.push_back(SeqBlocks{seq->blocks().data(), int32_t(seq->blocks().size())});
    return int32_t(in_batch.size() - 1);
  };
  for (const PrefillRun& run : runs) {
    const size_t n = run.tokens.size(), from = first_row(run);
    for (size_t i = 0, index = 0; i < n; ++i) {
      if (i == 0 || batch.size() == 0) index = size_t(seq_index(run.seq));  // a new run or a new pass
      const int32_t slot = int32_t(run.first + int64_t(i));
      batch.add(run.tokens[i], slot, int32_t(index), slot, want_rows && i >= from);
      if (size_t(batch.size()) == max_pass) AGENTKV_TRY(flush());
    }
  }
  return flush();
}

Status prefill_together(const Model& model, KvManager& kv, std::span<KvSequence* const> seqs,
                        std::span<const std::span<const int32_t>> tokens, ThreadPool& pool, const RowOutputs& out,
                        const PrefillOptions& opt) {
  AGENTKV_CHECK(seqs.size() == tokens.size());
  AGENTKV_TRY(reserve_all(seqs, tokens));
  // Block tables are final once every sequence has reserved: the pass may point into them.
  std::vector<PrefillRun> runs;
  for (size_t s = 0; s < seqs.size(); ++s) {
    AGENTKV_CHECK(&seqs[s]->manager() == &kv);
    if (!tokens[s].empty()) runs.push_back(PrefillRun{seqs[s], tokens[s], seqs[s]->n_tokens(), opt.rows_from});
  }
  AGENTKV_CHECK(!(opt.row_adapters && opt.commit));
  AGENTKV_TRY(write_runs(model, runs, pool, out, opt.n_tile_tokens, 0, opt.row_adapters));
  if (opt.commit)
    for (size_t s = 0; s < seqs.size(); ++s) seqs[s]->commit(tokens[s]);
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
  AGENTKV_TRY(prefill_together(model, kv, ptrs, tokens, pool, out));
  return seqs;
}

Status prefill_sequence(const Model& model, KvManager& kv, KvSequence& seq, std::span<const int32_t> tokens,
                        ThreadPool& pool, const RowOutputs& out, const PrefillOptions& opt, int64_t chunk) {
  AGENTKV_CHECK(chunk > 0 && &seq.manager() == &kv);
  if (tokens.empty()) return make_error("prefill: no tokens");
  KvSequence* one[] = {&seq};
  const std::span<const int32_t> all[] = {tokens};
  AGENTKV_TRY(reserve_all(one, all));
  const PrefillRun run{&seq, tokens, seq.n_tokens(), opt.rows_from};
  AGENTKV_CHECK(!(opt.row_adapters && opt.commit));
  AGENTKV_TRY(write_runs(model, std::span(&run, 1), pool, out, opt.n_tile_tokens, chunk, opt.row_adapters));
  if (opt.commit) seq.commit(tokens);
  return {};
}

Result<std::unique_ptr<KvManager>> private_kv_manager(const ModelConfig& cfg, uint64_t fingerprint, int64_t n_slots,
                                                      int block_size) {
  KvManagerOptions o;
  o.block_size = block_size;
  o.prefix_caching = false;
  o.mem_bytes = KvArena::bytes_per_block(cfg, block_size) * (n_slots / block_size + 8);
  return KvManager::create(cfg, fingerprint, o);
}

Result<std::unique_ptr<KvManager>> private_kv_manager(const LoadedModel& lm, int64_t n_slots, int block_size) {
  return private_kv_manager(lm.config(), lm.fingerprint, n_slots, block_size);
}

}  // namespace agentkv
