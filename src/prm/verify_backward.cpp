// The backward half of the verifier's training pass: from dloss/dlogodds through the head, the final
// norm and every block in reverse (FFN and its gate, the sandwich norms when the architecture has
// them, attention over the frozen cached K/V and the token's own K/V, RoPE, the Q/K norms, the block
// norms) into the adapters' A and B. Base weights are constants; the cached K/V get a gradient only
// when asked for (next_token_pass.h: a transfer map is refined through it).
#include <algorithm>
#include <cmath>
#include <span>

#include "ops/float_matvec.h"
#include "ops/norm.h"
#include "prm/verify_pass_record.h"

namespace agentkv::prm {
namespace {

// dx += (the transpose of rms_norm at x, weight w) dy, or dx += dy when there is no norm.
void norm_backward_or_copy(const float* x, const float* w, const float* dy, float* dx, int n, float eps) {
  if (w) {
    rms_norm_backward(x, w, dy, dx, n, eps);
  } else {
    for (int i = 0; i < n; ++i) dx[i] += dy[i];
  }
}

// dxs[e] += (W + adapters)^T dys[e] for one projection and every example of a batch, and the adapters'
// gradient (none without adapters), example after example.
void project_backward_many(const WeightView& w, const LoraAdapters* ad, int il, LoraProj p,
                           std::span<const float* const> xs, std::span<const float* const> dys, LoraAdapters* grad,
                           std::span<float* const> dxs, ThreadPool& pool) {
  matvec_transposed_add_f32_many(w, dys, dxs, pool);
  if (ad)
    for (size_t e = 0; e < xs.size(); ++e) ad->backward(il, p, xs[e], dys[e], *grad, dxs[e], pool);
}

// From d(attention output) to dqs (Q as attention reads it) and the token's own dkr and dv; with
// `cached`, also d(cached K) and d(cached V) of the slots attended ([slot - lo][kv_dim], set).
void attend_backward(const ModelConfig& c, const VerifyContext& ctx, int il, const LayerRecord& r, float scale,
                     const float* datt, float* dqs, float* dkr, float* dv, CachedKvGradient::Layer* cached) {
  std::vector<float> kc, vc;
  load_cached_kv(ctx, il, r.lo, kc, vc);
  const int hd = c.head_dim, kvd = c.kv_dim(), group = c.n_head / c.n_head_kv;
  const int64_t n_cached = ctx.n_slots - r.lo, n_att = n_cached + 1;
  if (cached) {
    cached->lo = r.lo;
    cached->dk.assign(size_t(n_cached * kvd), 0.0f);
    cached->dv.assign(size_t(n_cached * kvd), 0.0f);
  }
  std::vector<double> dp(static_cast<size_t>(n_att)), dq(static_cast<size_t>(hd));
  for (int h = 0; h < c.n_head; ++h) {
    const int g = h / group;
    const float* p = r.probs.data() + h * n_att;
    const float* da = datt + h * hd;
    const float* q = r.qs.data() + h * hd;
    auto v_of = [&](int64_t j) { return j < n_cached ? vc.data() + j * kvd + g * hd : r.v.data() + g * hd; };
    auto k_of = [&](int64_t j) { return j < n_cached ? kc.data() + j * kvd + g * hd : r.kr.data() + g * hd; };
    double pdp = 0;
    for (int64_t j = 0; j < n_att; ++j) {
      const float* v = v_of(j);
      double s = 0;
      for (int i = 0; i < hd; ++i) s += double(da[i]) * double(v[i]);
      dp[size_t(j)] = s;
      pdp += double(p[j]) * s;
    }
    std::fill(dq.begin(), dq.end(), 0.0);
    for (int64_t j = 0; j < n_att; ++j) {
      double ds = double(p[j]) * (dp[size_t(j)] - pdp);
      if (c.attn_softcap > 0.0f) {
        // The score is cap * tanh(raw / cap); recompute it from q and k to get the tanh.
        const float* k = k_of(j);
        double raw = 0;
        for (int i = 0; i < hd; ++i) raw += double(q[i]) * double(k[i]);
        const double t = std::tanh(double(scale) * raw / c.attn_softcap);
        ds *= 1.0 - t * t;
      }
      const double dr = double(scale) * ds;
      const float* k = k_of(j);
      for (int i = 0; i < hd; ++i) dq[size_t(i)] += dr * double(k[i]);
      if (j == n_cached) {
        for (int i = 0; i < hd; ++i) dkr[g * hd + i] += float(dr * double(q[i]));
      } else if (cached) {
        float* dk = cached->dk.data() + j * kvd + g * hd;
        float* dvc = cached->dv.data() + j * kvd + g * hd;
        for (int i = 0; i < hd; ++i) {
          dk[i] += float(dr * double(q[i]));
          dvc[i] += float(double(p[j]) * double(da[i]));
        }
      }
    }
    for (int i = 0; i < hd; ++i) {
      dqs[h * hd + i] += float(dq[size_t(i)]);
      dv[g * hd + i] += float(double(p[n_cached]) * double(da[i]));
    }
  }
}

// Per-head Q/K norm's transpose (dx = dy without one), into dx (overwritten).
void head_norm_backward(const float* x, const float* w, const float* dy, float* dx, int n_heads, int hd, float eps) {
  std::fill(dx, dx + int64_t(n_heads) * hd, 0.0f);
  for (int h = 0; h < n_heads; ++h) norm_backward_or_copy(x + h * hd, w, dy + h * hd, dx + h * hd, hd, eps);
}

// One example's place in a batched backward: its context, its record of this layer, where the cached
// K/V's gradient goes (null: nowhere), and dx.
struct BackSlot {
  const VerifyContext* ctx;
  const LayerRecord* r;
  CachedKvGradient::Layer* cached;
  std::vector<float>* dx;
};

// Each dx holds dloss/d(block output) and leaves with dloss/d(block input). Every example runs the
// steps one example alone would, in that order; only the projections are shared.
void backward_layer_many(const Model& model, int il, const LoraAdapters* ad, std::span<const BackSlot> batch,
                         LoraAdapters* grad, ThreadPool& pool) {
  const ModelConfig& c = model.config();
  const DecoderLayer& L = model.weights().layers[size_t(il)];
  const int d = c.n_embd, hd = c.head_dim, ff = c.n_ff;
  const FfnActivation act = model.weights().activation;
  const size_t n = batch.size();
  auto zeros = [n](int size) { return std::vector<std::vector<float>>(n, std::vector<float>(size_t(size), 0.0f)); };
  std::vector<const float*> xs(n), dys(n);
  std::vector<float*> dxs(n);
  // The projection w's backward for every example: input x, output gradient dy, input gradient dx.
  auto project = [&](const WeightView& w, LoraProj p, auto x_of, std::vector<std::vector<float>>& dy,
                     std::vector<std::vector<float>>& dx) {
    for (size_t e = 0; e < n; ++e) {
      xs[e] = x_of(*batch[e].r);
      dys[e] = dy[e].data();
      dxs[e] = dx[e].data();
    }
    project_backward_many(w, ad, il, p, xs, dys, grad, dxs, pool);
  };

  // FFN: x_out = x_mid + post_norm(down(act(gate) * up)).
  auto ddn = zeros(d), dact = zeros(ff);
  for (size_t e = 0; e < n; ++e)
    norm_backward_or_copy(batch[e].r->dn.data(), L.post_ffn_norm, batch[e].dx->data(), ddn[e].data(), d, c.rms_eps);
  project(L.ffn.down, LoraProj::kDown, [](const LayerRecord& r) { return r.act.data(); }, ddn, dact);
  auto dgate = zeros(ff), dup = zeros(ff);
  for (size_t e = 0; e < n; ++e) {
    const LayerRecord& r = *batch[e].r;
    for (int i = 0; i < ff; ++i) {
      const double g = r.gate[size_t(i)];
      dgate[e][size_t(i)] = float(double(dact[e][size_t(i)]) * double(r.up[size_t(i)]) * ffn_act_grad(act, g));
      dup[e][size_t(i)] = float(double(dact[e][size_t(i)]) * ffn_act(act, g));
    }
  }
  auto dh2 = zeros(d);
  auto h2 = [](const LayerRecord& r) { return r.h2.data(); };
  project(L.ffn.gate, LoraProj::kGate, h2, dgate, dh2);
  project(L.ffn.up, LoraProj::kUp, h2, dup, dh2);
  for (size_t e = 0; e < n; ++e)
    rms_norm_backward(batch[e].r->x_mid.data(), L.ffn_norm, dh2[e].data(), batch[e].dx->data(), d, c.rms_eps);

  // Attention: x_mid = x_in + post_norm(wo(attention(q, k, v))).
  auto dout = zeros(d), datt = zeros(c.q_dim());
  for (size_t e = 0; e < n; ++e)
    norm_backward_or_copy(batch[e].r->o.data(), L.post_attn_norm, batch[e].dx->data(), dout[e].data(), d, c.rms_eps);
  project(L.attn.wo, LoraProj::kO, [](const LayerRecord& r) { return r.att.data(); }, dout, datt);
  auto dq0 = zeros(c.q_dim()), dk0 = zeros(c.kv_dim()), dv = zeros(c.kv_dim());
  const Rope& rope = model.layer_rope(il);
  for (size_t e = 0; e < n; ++e) {
    const BackSlot& s = batch[e];
    const LayerRecord& r = *s.r;
    std::vector<float> dqs(size_t(c.q_dim()), 0.0f), dkr(size_t(c.kv_dim()), 0.0f);
    attend_backward(c, *s.ctx, il, r, attention_score_scale(c, L.extras), datt[e].data(), dqs.data(), dkr.data(),
                    dv[e].data(), s.cached);
    if (L.extras.q_scale > 0.0f) scale_inplace(dqs.data(), L.extras.q_scale, c.q_dim());
    rope.apply_transposed(dqs.data(), c.n_head, s.ctx->n_slots);
    rope.apply_transposed(dkr.data(), c.n_head_kv, s.ctx->n_slots);
    head_norm_backward(r.q0.data(), L.extras.q_norm, dqs.data(), dq0[e].data(), c.n_head, hd, c.rms_eps);
    head_norm_backward(r.k0.data(), L.extras.k_norm, dkr.data(), dk0[e].data(), c.n_head_kv, hd, c.rms_eps);
  }
  auto dh = zeros(d);
  auto h = [](const LayerRecord& r) { return r.h.data(); };
  project(L.attn.wq, LoraProj::kQ, h, dq0, dh);
  project(L.attn.wk, LoraProj::kK, h, dk0, dh);
  project(L.attn.wv, LoraProj::kV, h, dv, dh);
  for (size_t e = 0; e < n; ++e)
    rms_norm_backward(batch[e].r->x_in.data(), L.attn_norm, dh[e].data(), batch[e].dx->data(), d, c.rms_eps);
}

// Every example's blocks in reverse, the batch together, from dxs = dloss/d(the last block's output);
// cached: one per example (each null for none).
void backward_blocks_many(const Model& model, std::span<const VerifyContext* const> ctxs, const LoraAdapters* adapters,
                          std::span<const PassRecord* const> recs, std::vector<std::vector<float>>& dxs,
                          LoraAdapters* grad, std::span<CachedKvGradient* const> cached, ThreadPool& pool) {
  const int n_layer = model.config().n_layer;
  const size_t n = ctxs.size();
  for (CachedKvGradient* cg : cached)
    if (cg) cg->layers.assign(size_t(n_layer), {});
  std::vector<BackSlot> batch(n);
  for (int il = n_layer - 1; il >= 0; --il) {
    for (size_t e = 0; e < n; ++e)
      batch[e] = BackSlot{ctxs[e], &recs[e]->layers[size_t(il)], cached[e] ? &cached[e]->layers[size_t(il)] : nullptr,
                          &dxs[e]};
    backward_layer_many(model, il, adapters, batch, grad, pool);
  }
}

}  // namespace

void backward_pass_many(const Model& model, std::span<const VerifyContext* const> ctxs, const VerifyHead& head,
                        const LoraAdapters& adapters, std::span<const PassRecord* const> recs,
                        std::span<const double> dlogodds, LoraAdapters& grad, ThreadPool& pool) {
  AGENTKV_CHECK(ctxs.size() == recs.size() && ctxs.size() == dlogodds.size());
  const ModelConfig& c = model.config();
  const DecoderWeights& w = model.weights();
  const int d = c.n_embd;
  const size_t n = ctxs.size();
  // logodds = softcap(z+) - softcap(z-), z = head row . final_norm(x).
  std::vector<std::vector<float>> dxs(n, std::vector<float>(static_cast<size_t>(d), 0.0f));
  // The head rows of "+" and "-", dequantized once for the batch.
  std::vector<float> dxf(static_cast<size_t>(d)), rows(size_t(2 * d));
  for (int k = 0; k < 2; ++k) weight_row(w.head, k == 0 ? head.pos_token : head.neg_token, rows.data() + k * d);
  for (size_t e = 0; e < n; ++e) {
    const PassRecord& rec = *recs[e];
    std::fill(dxf.begin(), dxf.end(), 0.0f);
    for (int k = 0; k < 2; ++k) {
      double dz = k == 0 ? dlogodds[e] : -dlogodds[e];
      if (c.final_softcap > 0.0f) {
        const double t = rec.zc[k] / c.final_softcap;
        dz *= 1.0 - t * t;
      }
      const float* row = rows.data() + k * d;
      for (int i = 0; i < d; ++i) dxf[size_t(i)] += float(dz * double(row[i]));
    }
    rms_norm_backward(rec.x_final.data(), w.out_norm, dxf.data(), dxs[e].data(), d, c.rms_eps);
  }
  const std::vector<CachedKvGradient*> none(n, nullptr);
  backward_blocks_many(model, ctxs, &adapters, recs, dxs, &grad, none, pool);
}

void backward_pass(const Model& model, const VerifyContext& ctx, const VerifyHead& head, const LoraAdapters& adapters,
                   const PassRecord& rec, double dlogodds, LoraAdapters& grad, ThreadPool& pool) {
  const VerifyContext* ctxs[] = {&ctx};
  const PassRecord* recs[] = {&rec};
  const double dl[] = {dlogodds};
  backward_pass_many(model, ctxs, head, adapters, recs, dl, grad, pool);
}

void backward_blocks(const Model& model, const VerifyContext& ctx, const LoraAdapters* adapters, const PassRecord& rec,
                     std::vector<float> dx, LoraAdapters* grad, CachedKvGradient* cached, ThreadPool& pool) {
  const VerifyContext* ctxs[] = {&ctx};
  const PassRecord* recs[] = {&rec};
  std::vector<std::vector<float>> dxs(1, std::move(dx));
  CachedKvGradient* cg[] = {cached};
  backward_blocks_many(model, ctxs, adapters, recs, dxs, grad, cg, pool);
}

}  // namespace agentkv::prm
