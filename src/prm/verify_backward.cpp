// The backward half of the verifier's training pass: from dloss/dlogodds through the head, the final
// norm and every block in reverse (FFN and its gate, the sandwich norms when the architecture has
// them, attention over the frozen cached K/V and the token's own K/V, RoPE, the Q/K norms, the block
// norms) into the adapters' A and B. Base weights are constants; the cached K/V get a gradient only
// when asked for (next_token_pass.h: a transfer map is refined through it).
#include <cmath>

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

// dx += (W + adapters)^T dy for one projection, and the adapters' gradient (none without adapters).
void project_backward(const WeightView& w, const LoraAdapters* ad, int il, LoraProj p, const float* x,
                      const float* dy, LoraAdapters* grad, float* dx, ThreadPool& pool) {
  matvec_transposed_add_f32(w, dy, dx, pool);
  if (ad) ad->backward(il, p, x, dy, *grad, dx, pool);
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

// dx holds dloss/d(block output) and leaves with dloss/d(block input).
void backward_layer(const Model& model, const VerifyContext& ctx, int il, const LoraAdapters* ad,
                    const LayerRecord& r, LoraAdapters* grad, CachedKvGradient::Layer* cached, std::vector<float>& dx,
                    ThreadPool& pool) {
  const ModelConfig& c = model.config();
  const DecoderLayer& L = model.weights().layers[size_t(il)];
  const int d = c.n_embd, hd = c.head_dim, ff = c.n_ff;
  const FfnActivation act = model.weights().activation;

  // FFN: x_out = x_mid + post_norm(down(act(gate) * up)).
  std::vector<float> ddn(static_cast<size_t>(d), 0.0f), dact(static_cast<size_t>(ff), 0.0f);
  norm_backward_or_copy(r.dn.data(), L.post_ffn_norm, dx.data(), ddn.data(), d, c.rms_eps);
  project_backward(L.ffn.down, ad, il, LoraProj::kDown, r.act.data(), ddn.data(), grad, dact.data(), pool);
  std::vector<float> dgate(static_cast<size_t>(ff)), dup(static_cast<size_t>(ff));
  for (int i = 0; i < ff; ++i) {
    const double g = r.gate[size_t(i)];
    dgate[size_t(i)] = float(double(dact[size_t(i)]) * double(r.up[size_t(i)]) * ffn_act_grad(act, g));
    dup[size_t(i)] = float(double(dact[size_t(i)]) * ffn_act(act, g));
  }
  std::vector<float> dh2(static_cast<size_t>(d), 0.0f);
  project_backward(L.ffn.gate, ad, il, LoraProj::kGate, r.h2.data(), dgate.data(), grad, dh2.data(), pool);
  project_backward(L.ffn.up, ad, il, LoraProj::kUp, r.h2.data(), dup.data(), grad, dh2.data(), pool);
  rms_norm_backward(r.x_mid.data(), L.ffn_norm, dh2.data(), dx.data(), d, c.rms_eps);

  // Attention: x_mid = x_in + post_norm(wo(attention(q, k, v))).
  std::vector<float> dout(static_cast<size_t>(d), 0.0f), datt(size_t(c.q_dim()), 0.0f);
  norm_backward_or_copy(r.o.data(), L.post_attn_norm, dx.data(), dout.data(), d, c.rms_eps);
  project_backward(L.attn.wo, ad, il, LoraProj::kO, r.att.data(), dout.data(), grad, datt.data(), pool);
  std::vector<float> dqs(size_t(c.q_dim()), 0.0f), dkr(size_t(c.kv_dim()), 0.0f), dv(size_t(c.kv_dim()), 0.0f);
  attend_backward(c, ctx, il, r, attention_score_scale(c, L.extras), datt.data(), dqs.data(), dkr.data(), dv.data(),
                  cached);
  if (L.extras.q_scale > 0.0f) scale_inplace(dqs.data(), L.extras.q_scale, c.q_dim());
  const Rope& rope = model.layer_rope(il);
  rope.apply_transposed(dqs.data(), c.n_head, ctx.n_slots);
  rope.apply_transposed(dkr.data(), c.n_head_kv, ctx.n_slots);
  std::vector<float> dq0(size_t(c.q_dim())), dk0(size_t(c.kv_dim()));
  head_norm_backward(r.q0.data(), L.extras.q_norm, dqs.data(), dq0.data(), c.n_head, hd, c.rms_eps);
  head_norm_backward(r.k0.data(), L.extras.k_norm, dkr.data(), dk0.data(), c.n_head_kv, hd, c.rms_eps);
  std::vector<float> dh(static_cast<size_t>(d), 0.0f);
  project_backward(L.attn.wq, ad, il, LoraProj::kQ, r.h.data(), dq0.data(), grad, dh.data(), pool);
  project_backward(L.attn.wk, ad, il, LoraProj::kK, r.h.data(), dk0.data(), grad, dh.data(), pool);
  project_backward(L.attn.wv, ad, il, LoraProj::kV, r.h.data(), dv.data(), grad, dh.data(), pool);
  rms_norm_backward(r.x_in.data(), L.attn_norm, dh.data(), dx.data(), d, c.rms_eps);
}

}  // namespace

void backward_pass(const Model& model, const VerifyContext& ctx, const VerifyHead& head, const LoraAdapters& adapters,
                   const PassRecord& rec, double dlogodds, LoraAdapters& grad, ThreadPool& pool) {
  const ModelConfig& c = model.config();
  const DecoderWeights& w = model.weights();
  const int d = c.n_embd;
  // logodds = softcap(z+) - softcap(z-), z = head row . final_norm(x).
  std::vector<float> dxf(static_cast<size_t>(d), 0.0f), row(static_cast<size_t>(d));
  for (int k = 0; k < 2; ++k) {
    double dz = k == 0 ? dlogodds : -dlogodds;
    if (c.final_softcap > 0.0f) {
      const double t = rec.zc[k] / c.final_softcap;
      dz *= 1.0 - t * t;
    }
    weight_row(w.head, k == 0 ? head.pos_token : head.neg_token, row.data());
    for (int i = 0; i < d; ++i) dxf[size_t(i)] += float(dz * double(row[size_t(i)]));
  }
  std::vector<float> dx(static_cast<size_t>(d), 0.0f);
  rms_norm_backward(rec.x_final.data(), w.out_norm, dxf.data(), dx.data(), d, c.rms_eps);
  backward_blocks(model, ctx, &adapters, rec, std::move(dx), &grad, nullptr, pool);
}

void backward_blocks(const Model& model, const VerifyContext& ctx, const LoraAdapters* adapters, const PassRecord& rec,
                     std::vector<float> dx, LoraAdapters* grad, CachedKvGradient* cached, ThreadPool& pool) {
  const int n_layer = model.config().n_layer;
  if (cached) cached->layers.assign(size_t(n_layer), {});
  for (int il = n_layer - 1; il >= 0; --il)
    backward_layer(model, ctx, il, adapters, rec.layers[size_t(il)], grad, cached ? &cached->layers[size_t(il)] : nullptr,
                   dx, pool);
}

}  // namespace agentkv::prm
