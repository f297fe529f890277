// The forward half records every activation the backward (verify_backward.cpp) reads; both follow
// the block order of the decoders (model/gated_decoder.cpp, model/gemma_decoder.cpp) through the
// fields of DecoderWeights, so one pass serves every architecture that fills them.
#include "prm/verify_pass.h"

#include <algorithm>
#include <cmath>

#include "kv/direct_prefill.h"
#include "model/transformer_parts.h"
#include "ops/float_matvec.h"
#include "ops/norm.h"
#include "ops/quant.h"
#include "prm/step_probe.h"
#include "prm/verify_pass_record.h"

namespace agentkv::prm {
namespace {

constexpr double kSqrt2OverPi = 0.7978845608028654;
constexpr double kGeluCoef = 0.044715;

}  // namespace

double ffn_act(FfnActivation a, double g) {
  if (a == FfnActivation::kSilu) return g / (1.0 + std::exp(-g));
  return 0.5 * g * (1.0 + std::tanh(kSqrt2OverPi * g * (1.0 + kGeluCoef * g * g)));
}

double ffn_act_grad(FfnActivation a, double g) {
  if (a == FfnActivation::kSilu) {
    const double s = 1.0 / (1.0 + std::exp(-g));
    return s * (1.0 + g * (1.0 - s));
  }
  const double t = std::tanh(kSqrt2OverPi * g * (1.0 + kGeluCoef * g * g));
  return 0.5 * (1.0 + t) + 0.5 * g * (1.0 - t * t) * kSqrt2OverPi * (1.0 + 3.0 * kGeluCoef * g * g);
}

void load_cached_kv(const VerifyContext& ctx, int il, int64_t lo, std::vector<float>& k, std::vector<float>& v) {
  const PagedKvLayer l = ctx.fork.manager().arena().layer(il);
  const int32_t* table = ctx.fork.blocks().data();
  const int64_t n = ctx.n_slots - lo;
  k.resize(size_t(n * l.kv_dim));
  v.resize(size_t(n * l.kv_dim));
  for (int64_t j = 0; j < n; ++j) {
    const int64_t slot = lo + j;
    const int32_t block = table[slot / l.block_size];
    kv_load(k.data() + j * l.kv_dim, l.k(block, int(slot % l.block_size)), l.kv_dim);
    kv_load(v.data() + j * l.kv_dim, l.v(block, int(slot % l.block_size)), l.kv_dim);
  }
}

namespace {

// ys[e] = W xs[e] for every example, each with the adapters' delta for projection p of layer il
// (none without adapters): the weight rows dequantized once for the batch.
void project_many(const WeightView& w, const LoraAdapters* ad, int il, LoraProj p, std::span<const float* const> xs,
                  std::span<float* const> ys, ThreadPool& pool) {
  matvec_f32_many(w, xs, 0, w.rows, ys, pool);
  const int32_t row0[] = {0};
  if (ad)
    for (size_t e = 0; e < xs.size(); ++e) ad->add_delta(il, p, xs[e], row0, ys[e], pool);
}

void add(float* y, const float* b, int n) {
  if (b)
    for (int i = 0; i < n; ++i) y[i] += b[i];
}

// Attention of the verify token's heads over the cached slots [lo, pos) and its own K/V.
void attend(const ModelConfig& c, const VerifyContext& ctx, int il, LayerRecord& r, float scale) {
  std::vector<float> kc, vc;
  load_cached_kv(ctx, il, r.lo, kc, vc);
  const int hd = c.head_dim, kvd = c.kv_dim(), group = c.n_head / c.n_head_kv;
  const int64_t n_cached = ctx.n_slots - r.lo, n_att = n_cached + 1;
  r.probs.assign(size_t(c.n_head * n_att), 0.0f);
  r.att.assign(size_t(c.q_dim()), 0.0f);
  std::vector<double> s(static_cast<size_t>(n_att)), acc(static_cast<size_t>(hd));
  for (int h = 0; h < c.n_head; ++h) {
    const int g = h / group;
    const float* q = r.qs.data() + h * hd;
    auto score = [&](const float* k) {
      double d = 0;
      for (int i = 0; i < hd; ++i) d += double(q[i]) * double(k[i]);
      double x = double(scale) * d;
      if (c.attn_softcap > 0.0f) x = c.attn_softcap * std::tanh(x / c.attn_softcap);
      return x;
    };
    for (int64_t j = 0; j < n_cached; ++j) s[size_t(j)] = score(kc.data() + j * kvd + g * hd);
    s[size_t(n_cached)] = score(r.kr.data() + g * hd);
    const double mx = *std::max_element(s.begin(), s.end());
    double z = 0;
    for (double& e : s) z += (e = std::exp(e - mx));
    float* p = r.probs.data() + h * n_att;
    std::fill(acc.begin(), acc.end(), 0.0);
    for (int64_t j = 0; j < n_att; ++j) {
      p[j] = float(s[size_t(j)] / z);
      const float* v = j < n_cached ? vc.data() + j * kvd + g * hd : r.v.data() + g * hd;
      for (int i = 0; i < hd; ++i) acc[size_t(i)] += double(p[j]) * double(v[i]);
    }
    for (int i = 0; i < hd; ++i) r.att[size_t(h * hd + i)] = float(acc[size_t(i)]);
  }
}

// x += post_norm(y), or x += y when the block has no post-norm there.
void add_post_normed(float* x, const std::vector<float>& y, const float* norm, float eps) {
  const int n = int(y.size());
  std::vector<float> normed = y;
  if (norm) rms_norm(y.data(), norm, normed.data(), n, eps);
  add_inplace(x, normed.data(), n);
}

// kept = x (the residual stream entering a norm), normed = the norm of x.
void keep_and_norm(const float* x, int n, const float* norm, float eps, std::vector<float>& kept,
                   std::vector<float>& normed) {
  kept.assign(x, x + n);
  normed.resize(size_t(n));
  rms_norm(x, norm, normed.data(), n, eps);
}

// One example's place in a batched pass: its context, its record of this layer, its residual stream.
struct PassSlot {
  const VerifyContext* ctx;
  LayerRecord* r;
  float* x;
};

// The layer for every example of the batch, in the order one example alone would run it: only the
// projections are shared (project_many), everything else is each example's own.
void forward_layer_many(const Model& model, int il, const LoraAdapters* ad, std::span<const PassSlot> batch,
                        ThreadPool& pool) {
  const ModelConfig& c = model.config();
  const DecoderLayer& L = model.weights().layers[size_t(il)];
  const int d = c.n_embd, hd = c.head_dim, ff = c.n_ff;
  const size_t n = batch.size();
  std::vector<const float*> in(n);
  std::vector<float*> out(n);
  // The projection w for every example, from input(record) into output(record), sized here.
  auto project = [&](const WeightView& w, LoraProj p, auto input, auto output) {
    for (size_t e = 0; e < n; ++e) {
      in[e] = input(*batch[e].r);
      std::vector<float>& y = output(*batch[e].r);
      y.resize(size_t(w.rows));
      out[e] = y.data();
    }
    project_many(w, ad, il, p, in, out, pool);
  };
  for (const PassSlot& s : batch) keep_and_norm(s.x, d, L.attn_norm, c.rms_eps, s.r->x_in, s.r->h);
  auto h = [](LayerRecord& r) -> const float* { return r.h.data(); };
  project(L.attn.wq, LoraProj::kQ, h, [](LayerRecord& r) -> std::vector<float>& { return r.q0; });
  project(L.attn.wk, LoraProj::kK, h, [](LayerRecord& r) -> std::vector<float>& { return r.k0; });
  project(L.attn.wv, LoraProj::kV, h, [](LayerRecord& r) -> std::vector<float>& { return r.v; });
  const Rope& rope = model.layer_rope(il);
  for (const PassSlot& s : batch) {
    LayerRecord& r = *s.r;
    add(r.q0.data(), L.extras.bq, c.q_dim());
    add(r.k0.data(), L.extras.bk, c.kv_dim());
    add(r.v.data(), L.extras.bv, c.kv_dim());
    r.qs = r.q0;
    r.kr = r.k0;
    if (L.extras.q_norm)
      for (int hh = 0; hh < c.n_head; ++hh)
        rms_norm(&r.qs[size_t(hh * hd)], L.extras.q_norm, &r.qs[size_t(hh * hd)], hd, c.rms_eps);
    if (L.extras.k_norm)
      for (int hh = 0; hh < c.n_head_kv; ++hh)
        rms_norm(&r.kr[size_t(hh * hd)], L.extras.k_norm, &r.kr[size_t(hh * hd)], hd, c.rms_eps);
    rope.apply(r.qs.data(), c.n_head, s.ctx->n_slots);
    rope.apply(r.kr.data(), c.n_head_kv, s.ctx->n_slots);
    if (L.extras.q_scale > 0.0f) scale_inplace(r.qs.data(), L.extras.q_scale, c.q_dim());
    r.lo = first_attended_slot(s.ctx->n_slots, layer_window(c, il));
    attend(c, *s.ctx, il, r, attention_score_scale(c, L.extras));
  }
  project(L.attn.wo, LoraProj::kO, [](LayerRecord& r) -> const float* { return r.att.data(); },
          [](LayerRecord& r) -> std::vector<float>& { return r.o; });
  for (const PassSlot& s : batch) {
    LayerRecord& r = *s.r;
    add_post_normed(s.x, r.o, L.post_attn_norm, c.rms_eps);
    keep_and_norm(s.x, d, L.ffn_norm, c.rms_eps, r.x_mid, r.h2);
  }
  auto h2 = [](LayerRecord& r) -> const float* { return r.h2.data(); };
  project(L.ffn.gate, LoraProj::kGate, h2, [](LayerRecord& r) -> std::vector<float>& { return r.gate; });
  project(L.ffn.up, LoraProj::kUp, h2, [](LayerRecord& r) -> std::vector<float>& { return r.up; });
  const FfnActivation act = model.weights().activation;
  for (const PassSlot& s : batch) {
    LayerRecord& r = *s.r;
    r.act.resize(size_t(ff));
    for (int i = 0; i < ff; ++i) r.act[size_t(i)] = float(ffn_act(act, r.gate[size_t(i)]) * double(r.up[size_t(i)]));
  }
  project(L.ffn.down, LoraProj::kDown, [](LayerRecord& r) -> const float* { return r.act.data(); },
          [](LayerRecord& r) -> std::vector<float>& { return r.dn; });
  for (const PassSlot& s : batch) {
    LayerRecord& r = *s.r;
    add_post_normed(s.x, r.dn, L.post_ffn_norm, c.rms_eps);
  }
}

}  // namespace

void weight_row(const WeightView& w, int64_t r, float* row) {
  dequantize_row(w.type, static_cast<const uint8_t*>(w.data) + size_t(r) * w.row_bytes, row, w.cols);
}

std::vector<PassRecord> forward_blocks_many(const Model& model, std::span<const VerifyContext* const> ctxs,
                                            std::span<const int32_t> tokens, const LoraAdapters* adapters,
                                            ThreadPool& pool) {
  AGENTKV_CHECK(ctxs.size() == tokens.size());
  const ModelConfig& c = model.config();
  const DecoderWeights& w = model.weights();
  const int d = c.n_embd;
  const size_t n = ctxs.size();
  std::vector<PassRecord> recs(n);
  std::vector<std::vector<float>> xs(n, std::vector<float>(static_cast<size_t>(d)));
  for (size_t e = 0; e < n; ++e) {
    recs[e].layers.resize(size_t(c.n_layer));
    weight_row(w.embd, tokens[e], xs[e].data());
    if (w.embd_scale != 1.0f) scale_inplace(xs[e].data(), w.embd_scale, d);
  }
  std::vector<PassSlot> batch(n);
  for (int il = 0; il < c.n_layer; ++il) {
    for (size_t e = 0; e < n; ++e) batch[e] = PassSlot{ctxs[e], &recs[e].layers[size_t(il)], xs[e].data()};
    forward_layer_many(model, il, adapters, batch, pool);
  }
  for (size_t e = 0; e < n; ++e) recs[e].x_final = std::move(xs[e]);
  return recs;
}

PassRecord forward_blocks(const Model& model, const VerifyContext& ctx, int32_t token, const LoraAdapters* adapters,
                          ThreadPool& pool) {
  const VerifyContext* ctxs[] = {&ctx};
  const int32_t tokens[] = {token};
  return std::move(forward_blocks_many(model, ctxs, tokens, adapters, pool).front());
}

std::vector<PassRecord> forward_pass_many(const Model& model, std::span<const VerifyContext* const> ctxs,
                                          const VerifyHead& head, const LoraAdapters& adapters, ThreadPool& pool) {
  const ModelConfig& c = model.config();
  const DecoderWeights& w = model.weights();
  const int d = c.n_embd;
  const std::vector<int32_t> tokens(ctxs.size(), head.tokens.back());
  std::vector<PassRecord> recs = forward_blocks_many(model, ctxs, tokens, &adapters, pool);
  // The head rows of "+" and "-", dequantized once for the batch.
  std::vector<float> xf(static_cast<size_t>(d)), rows(size_t(2 * d));
  for (int k = 0; k < 2; ++k) weight_row(w.head, k == 0 ? head.pos_token : head.neg_token, rows.data() + k * d);
  for (PassRecord& rec : recs) {
    rms_norm(rec.x_final.data(), w.out_norm, xf.data(), d, c.rms_eps);
    for (int k = 0; k < 2; ++k) {
      const float* row = rows.data() + k * d;
      double z = 0;
      for (int i = 0; i < d; ++i) z += double(row[i]) * double(xf[size_t(i)]);
      rec.z[k] = z;
      rec.zc[k] = c.final_softcap > 0.0f ? c.final_softcap * std::tanh(z / c.final_softcap) : z;
    }
    rec.logodds = rec.zc[0] - rec.zc[1];
  }
  return recs;
}

PassRecord forward_pass(const Model& model, const VerifyContext& ctx, const VerifyHead& head,
                        const LoraAdapters& adapters, ThreadPool& pool) {
  const VerifyContext* ctxs[] = {&ctx};
  return std::move(forward_pass_many(model, ctxs, head, adapters, pool).front());
}

LossValue verify_loss(double logodds, double target, VerifyLoss loss) {
  const double p = sigmoid(logodds);
  if (loss == VerifyLoss::kSquaredError) return {p, (p - target) * (p - target), 2.0 * (p - target) * p * (1.0 - p)};
  return {p, target * softplus(-logodds) + (1.0 - target) * softplus(logodds), p - target};
}

Result<std::vector<VerifyContext>> prepare_verify_contexts(const Model& model, KvManager& kv,
                                                           std::span<const KvSequence* const> contexts,
                                                           const VerifyHead& head, ThreadPool& pool) {
  if (head.tokens.empty()) return make_error("verify training: the verify head has no tokens");
  const std::span<const int32_t> prefix(head.tokens.data(), head.tokens.size() - 1);
  std::vector<VerifyContext> out;
  out.reserve(contexts.size());  // the pass points into each fork's block table
  for (size_t i = 0; i < contexts.size(); ++i) {
    const KvSequence& ctx = *contexts[i];
    if (&ctx.manager() != &kv) return make_error("verify training: context " + std::to_string(i) + " is of another KV manager");
    if (ctx.n_tokens() == 0 || !ctx.has_kv(0, ctx.n_tokens()))
      return make_error("verify training: context " + std::to_string(i) + " is empty or has no K/V in places");
    VerifyContext v{ctx.fork(), ctx.n_tokens() + int64_t(prefix.size())};
    if (!v.fork.reserve(int64_t(prefix.size())))
      return make_error(ErrorCode::kResourceExhausted, "verify training: the KV pool has no room for the verify tokens");
    out.push_back(std::move(v));
  }
  if (prefix.empty()) return out;
  std::vector<PrefillRun> runs;
  for (VerifyContext& v : out)
    runs.push_back(PrefillRun{&v.fork, prefix, v.fork.n_tokens(), int64_t(prefix.size())});
  AGENTKV_TRY(write_runs(model, runs, pool));
  return out;
}

Status check_pass_inputs(const Model& model, const VerifyContext& ctx, const VerifyHead& head,
                         const LoraAdapters& adapters, double target, const LoraAdapters* grad) {
  const ModelConfig& c = model.config();
  if (!adapters.fits(c)) return make_error("verify training: the adapters were made for another model geometry");
  if (grad && (grad->params().size() != adapters.params().size() || grad->rank() != adapters.rank()))
    return make_error("verify training: the gradient does not have the adapters' shape");
  if (head.tokens.empty() || head.pos_token < 0 || head.neg_token < 0 || head.pos_token >= c.n_vocab ||
      head.neg_token >= c.n_vocab || head.tokens.back() < 0 || head.tokens.back() >= c.n_vocab)
    return make_error("verify training: the verify head's tokens are outside the vocabulary");
  if (!(target >= 0.0 && target <= 1.0)) return make_error("verify training: target outside [0, 1]");
  return check_context_slots(ctx, "verify training");
}

Status check_context_slots(const VerifyContext& ctx, const char* who) {
  if (ctx.n_slots < 1 || ctx.n_slots > int64_t(ctx.fork.blocks().size()) * ctx.fork.manager().block_size())
    return make_error(std::string(who) + ": the context's slots are outside its blocks");
  return {};
}

Result<VerifyOutput> verify_pass(const Model& model, const VerifyContext& ctx, const VerifyHead& head,
                                 const LoraAdapters& adapters, double target, VerifyLoss loss, LoraAdapters* grad,
                                 ThreadPool& pool) {
  if (loss == VerifyLoss::kPairwise)
    return make_error("verify training: the pairwise loss is a batch's (batch_gradient), not one example's");
  AGENTKV_TRY(check_pass_inputs(model, ctx, head, adapters, target, grad));
  const PassRecord rec = forward_pass(model, ctx, head, adapters, pool);
  const LossValue l = verify_loss(rec.logodds, target, loss);
  if (grad) backward_pass(model, ctx, head, adapters, rec, l.dlogodds, *grad, pool);
  return VerifyOutput{rec.logodds, l.p, l.loss};
}

}  // namespace agentkv::prm
