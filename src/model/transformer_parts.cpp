#include "model/transformer_parts.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <utility>

#include "gguf/gguf_file.h"
#include "ops/attention.h"
#include "ops/attention_spans.h"
#include "ops/norm.h"

namespace agentkv {

Result<WeightView> find_matrix(const GgufFile& f, const std::string& name, int64_t cols, int64_t rows) {
  const GgufTensorInfo* t = f.tensor(name);
  if (!t) return make_error("tensor '" + name + "' missing");
  if (t->n_dims != 2 || t->ne[0] != cols || t->ne[1] != rows)
    return make_error("tensor '" + name + "' has shape [" + std::to_string(t->ne[0]) + ", " +
                      std::to_string(t->n_dims > 1 ? t->ne[1] : 1) + "], expected [" + std::to_string(cols) +
                      ", " + std::to_string(rows) + "]");
  if (!is_matmul_type(static_cast<GgmlType>(t->type))) {
    const GgmlTypeInfo* ti = ggml_type_info(t->type);
    return make_error("tensor '" + name + "' has type " + (ti ? ti->name : std::to_string(t->type)) +
                      ", which agentkv cannot multiply");
  }
  WeightView w;
  w.type = static_cast<GgmlType>(t->type);
  w.cols = cols;
  w.rows = rows;
  w.data = t->data;
  w.row_bytes = size_t(t->nbytes / uint64_t(rows));
  return w;
}

Result<WeightView> find_matrix_rows(const GgufFile& f, const std::string& name, int64_t cols, int64_t total_rows,
                                    int64_t row_begin, int64_t n_rows) {
  WeightView w;
  AGENTKV_ASSIGN_OR_RETURN(w, find_matrix(f, name, cols, total_rows));
  AGENTKV_CHECK(row_begin >= 0 && n_rows > 0 && row_begin + n_rows <= total_rows);
  w.data = static_cast<const uint8_t*>(w.data) + size_t(row_begin) * w.row_bytes;
  w.rows = n_rows;
  return w;
}

Result<const float*> find_vector(const GgufFile& f, const std::string& name, int64_t n) {
  const GgufTensorInfo* t = f.tensor(name);
  if (!t) return make_error("tensor '" + name + "' missing");
  if (t->n_dims != 1 || t->ne[0] != n)
    return make_error("tensor '" + name + "' has the wrong shape, expected [" + std::to_string(n) + "]");
  if (t->type != uint32_t(GgmlType::F32)) return make_error("tensor '" + name + "' is not F32");
  if (reinterpret_cast<uintptr_t>(t->data) % alignof(float) != 0)
    return make_error("tensor '" + name + "' data is not 4-byte aligned");
  return reinterpret_cast<const float*>(t->data);
}

Result<AttentionWeights> find_attention(const GgufFile& f, const std::string& p, const ModelConfig& c) {
  AttentionWeights a;
  AGENTKV_ASSIGN_OR_RETURN(a.wq, find_matrix(f, p + "attn_q.weight", c.n_embd, c.q_dim()));
  AGENTKV_ASSIGN_OR_RETURN(a.wk, find_matrix(f, p + "attn_k.weight", c.n_embd, c.kv_dim()));
  AGENTKV_ASSIGN_OR_RETURN(a.wv, find_matrix(f, p + "attn_v.weight", c.n_embd, c.kv_dim()));
  AGENTKV_ASSIGN_OR_RETURN(a.wo, find_matrix(f, p + "attn_output.weight", c.q_dim(), c.n_embd));
  return a;
}

Result<FfnWeights> find_ffn(const GgufFile& f, const std::string& p, const ModelConfig& c) {
  FfnWeights w;
  AGENTKV_ASSIGN_OR_RETURN(w.gate, find_matrix(f, p + "ffn_gate.weight", c.n_embd, c.n_ff));
  AGENTKV_ASSIGN_OR_RETURN(w.up, find_matrix(f, p + "ffn_up.weight", c.n_embd, c.n_ff));
  AGENTKV_ASSIGN_OR_RETURN(w.down, find_matrix(f, p + "ffn_down.weight", c.n_ff, c.n_embd));
  return w;
}

Result<WeightView> find_embedding(const GgufFile& f, ModelConfig& cfg) {
  const GgufTensorInfo* emb = f.tensor("token_embd.weight");
  if (!emb || emb->n_dims != 2) return make_error("tensor 'token_embd.weight' missing or not 2-D");
  if (emb->ne[1] < 1 || emb->ne[1] > (int64_t(1) << 24))
    return make_error("tensor 'token_embd.weight' has an unsupported vocabulary size " + std::to_string(emb->ne[1]));
  cfg.n_vocab = int(emb->ne[1]);
  return find_matrix(f, "token_embd.weight", cfg.n_embd, cfg.n_vocab);
}

void embed_tokens(const WeightView& emb, const Batch& b, float scale, float* x, ThreadPool& pool) {
  const int64_t n_embd = emb.cols;
  pool.parallel_for(b.size(), 16, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const uint8_t* row = static_cast<const uint8_t*>(emb.data) + size_t(b.tokens[t]) * emb.row_bytes;
      float* dst = x + t * n_embd;
      dequantize_row(emb.type, row, dst, n_embd);
      if (scale != 1.0f) scale_inplace(dst, scale, n_embd);
    }
  });
}

void norm_rows(const float* src, const float* w, float* dst, int64_t n_tokens, int d, float eps, ThreadPool& pool) {
  pool.parallel_for(n_tokens, 8, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) rms_norm(src + t * d, w, dst + t * d, d, eps);
  });
}

void write_kv(const Batch& b, const KvArena& kv, int il, const float* k, const float* v) {
  const PagedKvLayer l = kv.layer(il);
  const int bs = kv.block_size();
  for (int64_t t = 0; t < b.size(); ++t) {
    const SeqBlocks& s = b.seqs[b.seq[t]];
    const int32_t slot = b.slots[t];
    const int32_t block = s.table[slot / bs];
    kv_store(l.k(block, slot % bs), k + t * l.kv_dim, l.kv_dim);
    kv_store(l.v(block, slot % bs), v + t * l.kv_dim, l.kv_dim);
  }
}

int layer_window(const ModelConfig& cfg, int il) { return cfg.layer_is_swa[size_t(il)] ? cfg.sliding_window : 0; }

int64_t first_attended_slot(int64_t slot, int window) {
  return window > 0 ? std::max<int64_t>(0, slot - window + 1) : 0;
}

float attention_score_scale(const ModelConfig& c, const AttentionExtras& x) {
  return x.q_scale > 0.0f ? 1.0f : 1.0f / std::sqrt(float(c.head_dim));
}

void attention(const ModelConfig& cfg, const Batch& b, const KvArena& kv, int il, const float* q,
               int window, float scale, float* out, ThreadPool& pool) {
  const PagedKvLayer l = kv.layer(il);
  const int hd = cfg.head_dim;
  const int group = cfg.n_head / cfg.n_head_kv;
  // Contexts read as spans (master–diff): each prepares the layer once, before any token reads it, from
  // the lowest slot its tokens attend here (a sliding-window layer sees only its window).
  AGENTKV_CHECK(b.contexts.empty() || b.contexts.size() == b.seqs.size());
  std::vector<std::pair<AttentionContext*, int64_t>> contexts;
  if (!b.contexts.empty()) {
    std::vector<int32_t> first(b.seqs.size(), INT32_MAX);
    for (int64_t t = 0; t < b.size(); ++t) first[size_t(b.seq[t])] = std::min(first[size_t(b.seq[t])], b.slots[t]);
    for (size_t si = 0; si < b.contexts.size(); ++si)
      if (b.contexts[si] && first[si] != INT32_MAX) contexts.emplace_back(b.contexts[si], first_attended_slot(first[si], window));
  }
  if (!contexts.empty())
    pool.parallel_for(int64_t(contexts.size()), 1, [&](int64_t c0, int64_t c1) {
      for (int64_t c = c0; c < c1; ++c) contexts[size_t(c)].first->prepare_layer(il, contexts[size_t(c)].second);
    });
  // One work item = a run of consecutive tokens of one sequence and one KV head with its whole group of
  // query heads: each cached K/V row is read once per group and run (attend_spans_many, the same bits as
  // one token at a time; a run of one is a decode step). Runs are at most kRunTokens long, shorter when
  // the batch is small, so every thread still gets several items.
  constexpr int64_t kRunTokens = 16;
  const int64_t run_cap = std::clamp<int64_t>(b.size() * cfg.n_head_kv / (4 * int64_t(pool.size())), 1, kRunTokens);
  std::vector<std::pair<int64_t, int64_t>> runs;  // tokens [first, second)
  for (int64_t t0 = 0; t0 < b.size();) {
    int64_t t1 = t0 + 1;
    while (t1 < b.size() && t1 - t0 < run_cap && b.seq[t1] == b.seq[t0]) ++t1;
    runs.emplace_back(t0, t1);
    t0 = t1;
  }
  const int64_t n_items = int64_t(runs.size()) * cfg.n_head_kv;
  pool.parallel_for(n_items, 1, [&](int64_t i0, int64_t i1) {
    std::vector<AttentionSpan> spans;
    std::vector<SpanQuery> queries;
    for (int64_t i = i0; i < i1; ++i) {
      const auto [t0, t1] = runs[size_t(i / cfg.n_head_kv)];
      const int kvh = int(i % cfg.n_head_kv);
      const int32_t si = b.seq[t0];
      AttentionContext* c = b.contexts.empty() ? nullptr : b.contexts[size_t(si)];
      // The rows any token of the run attends: slots [lo, hi].
      int64_t lo = INT64_MAX, hi = 0;
      for (int64_t t = t0; t < t1; ++t) {
        lo = std::min(lo, first_attended_slot(b.slots[t], window));
        hi = std::max<int64_t>(hi, b.slots[t]);
      }
      spans.clear();
      if (c) c->spans(b.seqs[size_t(si)], lo, hi, spans);
      else spans.push_back(AttentionSpan{b.seqs[size_t(si)].table, lo, hi - lo + 1});
      const auto offset = [&](int64_t t) { return (t * cfg.n_head + int64_t(kvh) * group) * hd; };
      queries.clear();
      for (int64_t t = t0; t < t1; ++t) {
        const int64_t first = first_attended_slot(b.slots[t], window);
        queries.push_back(SpanQuery{q + offset(t), out + offset(t), first - lo, b.slots[t] - first + 1});
      }
      attend_spans_many(queries, group, l, spans, kvh, hd, scale, cfg.attn_softcap);
    }
  });
}

void project(const WeightView& w, const Batch& b, int il, LoraProj p, const float* x, float* y, ThreadPool& pool) {
  matmul(w, x, b.size(), y, pool, b.n_tile_tokens);
  if (b.adapters) b.adapters->add_delta(il, p, x, b.logit_rows, y, pool);
}

namespace {

void add_bias(float* y, const float* bias, int64_t n_tokens, int width) {
  for (int64_t t = 0; t < n_tokens; ++t)
    for (int i = 0; i < width; ++i) y[t * width + i] += bias[i];
}

}  // namespace

void attention_block(const ModelConfig& c, const Batch& b, const KvArena& kv, int il, const AttentionWeights& w,
                     const AttentionExtras& x, const Rope& rope, int window, const float* h, float* out,
                     AttentionScratch& s, ThreadPool& pool) {
  const int64_t n = b.size();
  const int hd = c.head_dim;
  project(w.wq, b, il, LoraProj::kQ, h, s.q.data(), pool);
  project(w.wk, b, il, LoraProj::kK, h, s.k.data(), pool);
  project(w.wv, b, il, LoraProj::kV, h, s.v.data(), pool);
  if (x.bq) add_bias(s.q.data(), x.bq, n, c.q_dim());
  if (x.bk) add_bias(s.k.data(), x.bk, n, c.kv_dim());
  if (x.bv) add_bias(s.v.data(), x.bv, n, c.kv_dim());
  pool.parallel_for(n, 8, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      float* qt = &s.q[size_t(t * c.q_dim())];
      float* kt = &s.k[size_t(t * c.kv_dim())];
      if (x.q_norm)
        for (int hh = 0; hh < c.n_head; ++hh) rms_norm(qt + hh * hd, x.q_norm, qt + hh * hd, hd, c.rms_eps);
      if (x.k_norm)
        for (int hh = 0; hh < c.n_head_kv; ++hh) rms_norm(kt + hh * hd, x.k_norm, kt + hh * hd, hd, c.rms_eps);
      // Rope::apply for Q and K, the token's cos and sin computed once for both.
      float cs[512], sn[512];
      rope.angles(b.positions[t], rope.attn_factor(), cs, sn);
      rope.rotate_by(qt, c.n_head, cs, sn);
      rope.rotate_by(kt, c.n_head_kv, cs, sn);
      if (x.q_scale > 0.0f) scale_inplace(qt, x.q_scale, c.q_dim());
    }
  });
  write_kv(b, kv, il, s.k.data(), s.v.data());
  attention(c, b, kv, il, s.q.data(), window, attention_score_scale(c, x), s.att.data(), pool);
  project(w.wo, b, il, LoraProj::kO, s.att.data(), out, pool);
}

void lm_head(const WeightView& head, const float* out_norm, float eps, const Batch& b, const float* x,
             int n_embd, float* logits, ThreadPool& pool, float softcap) {
  const int64_t n_out = int64_t(b.logit_rows.size());
  if (n_out == 0) return;
  std::vector<float> normed(size_t(n_out) * n_embd);
  for (int64_t i = 0; i < n_out; ++i)
    rms_norm(x + int64_t(b.logit_rows[i]) * n_embd, out_norm, normed.data() + i * n_embd, n_embd, eps);
  // Batch-invariant mode: logit rows of tile tokens come first (Model::forward checks it).
  int64_t n_tile = -1;
  if (b.n_tile_tokens >= 0) {
    n_tile = 0;
    while (n_tile < n_out && b.logit_rows[size_t(n_tile)] < b.n_tile_tokens) ++n_tile;
  }
  matmul(head, normed.data(), n_out, logits, pool, n_tile);
  if (softcap > 0.0f) apply_softcap(logits, n_out * head.rows, softcap);
}

}  // namespace agentkv
