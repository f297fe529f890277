#include "lab/transfer/transfer_refine.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "kv/direct_prefill.h"
#include "ops/matmul.h"
#include "prm/next_token_pass.h"
#include "transfer/kv_transfer.h"
#include "transfer/layer_kv.h"
#include "transfer/paired_features.h"
#include "transfer/token_alignment.h"

namespace agentkv {

Result<TransferRefiner> TransferRefiner::create(TransferMap map, const LoadedModel& sender, const LoadedModel& receiver,
                                                TransferRefineOptions opt) {
  AGENTKV_TRY(check_transfer_pair(map, sender, receiver));
  if (map.receiver_hidden_layers > 0)
    return make_error("refine-transfer: the map is conditioned on the receiver's first " +
                      std::to_string(map.receiver_hidden_layers) +
                      " layers; refining follows the sender's K/V only (fit one without --receiver-layers)");
  if (!(opt.native_suffix_share >= 0.0 && opt.native_suffix_share < 1.0))
    return make_error("refine-transfer: the native suffix share must be in [0, 1): with 1 nothing is transferred");
  if (opt.queries < 0) return make_error("refine-transfer: queries per passage must be >= 0");
  if (!(opt.lr > 0.0)) return make_error("refine-transfer: the step (lr) must be > 0");
  if (!(opt.ridge_alpha >= 0.0)) return make_error("refine-transfer: the preconditioner's ridge must be >= 0");
  return TransferRefiner(std::move(map), sender, receiver, opt);
}

TransferRefiner::TransferRefiner(TransferMap map, const LoadedModel& sender, const LoadedModel& receiver,
                                 TransferRefineOptions opt)
    : map_(std::move(map)), sender_(&sender), receiver_(&receiver), opt_(opt) {
  for (int32_t sl : map_.sender_layer) grams_.try_emplace(sl, map_.in_dim());
}

Result<RefineStepReport> TransferRefiner::step(std::string_view context, std::string_view continuation,
                                               ThreadPool& pool) {
  const LoadedModel& sender = *sender_;
  const LoadedModel& receiver = *receiver_;
  TokenSpans s, r;
  AGENTKV_ASSIGN_OR_RETURN(s, tokenize_with_spans(*sender.tokenizer, context, sender.tokenizer->add_bos_default()));
  AGENTKV_ASSIGN_OR_RETURN(r, tokenize_with_spans(*receiver.tokenizer, context, receiver.tokenizer->add_bos_default()));
  const std::vector<int32_t> cont = receiver.tokenizer->encode(continuation, false, false);
  if (cont.empty()) return make_error("refine-transfer: empty continuation");
  const int64_t nr = int64_t(r.size()), nc = int64_t(cont.size());
  std::unique_ptr<KvManager> skv, rkv;
  AGENTKV_ASSIGN_OR_RETURN(skv, private_kv_manager(sender, int64_t(s.size()) + 32, 16));
  AGENTKV_ASSIGN_OR_RETURN(rkv, private_kv_manager(receiver, nr + nc + 32, 16));
  KvSequence sender_seq(*skv), seq(*rkv);
  AGENTKV_TRY(prefill_sequence(*sender.model, *skv, sender_seq, s.tokens, pool));
  KvTransferOptions to;
  to.native_suffix_share = opt_.native_suffix_share;
  KvTransferReport rep;
  AGENTKV_ASSIGN_OR_RETURN(rep, transfer_aligned_kv_cache(map_, sender, *skv, sender_seq, s, receiver, *rkv, seq, r,
                                                          pool, to));
  const int64_t p0 = rep.n_native - rep.n_suffix, n_proj = rep.n_projected;
  if (n_proj == 0) return make_error("refine-transfer: the context has no token to transfer (too short)");
  // The continuation but its last token, read natively over the transferred context.
  if (nc > 1)
    AGENTKV_TRY(prefill_sequence(*receiver.model, *rkv, seq, std::span<const int32_t>(cont.data(), size_t(nc - 1)), pool));
  std::vector<int32_t> all = r.tokens;
  all.insert(all.end(), cont.begin(), cont.end());

  // The loss: the NLL of all[q + 1] for query positions q in [nr - 1, nr + nc - 2], the token at q
  // read over slots [0, q); the gradient summed over the transferred rows [p0, p0 + n_proj).
  const ModelConfig& rc = receiver.config();
  const int kvd = rc.kv_dim();
  const int64_t n_pos = nc;
  const int64_t n_q = opt_.queries > 0 ? std::min<int64_t>(opt_.queries, n_pos) : n_pos;
  std::vector<std::vector<float>> dk(size_t(rc.n_layer), std::vector<float>(size_t(n_proj * kvd), 0.0f));
  std::vector<std::vector<float>> dv = dk;
  double nll = 0;
  prm::CachedKvGradient g;
  for (int64_t k = 0; k < n_q; ++k) {
    const int64_t q = nr - 1 + (n_q == n_pos ? k : k * n_pos / n_q);
    const prm::VerifyContext ctx{seq.fork(), q};
    auto l = prm::next_token_nll(*receiver.model, ctx, all[size_t(q)], all[size_t(q + 1)], &g, pool);
    if (!l.ok()) return make_error("refine-transfer: " + l.error());
    nll += *l;
    for (int il = 0; il < rc.n_layer; ++il) {
      const prm::CachedKvGradient::Layer& gl = g.layers[size_t(il)];
      const int64_t b = std::max(gl.lo, p0), e = std::min(q, p0 + n_proj);
      for (int64_t slot = b; slot < e; ++slot) {
        const float* gk = gl.dk.data() + (slot - gl.lo) * kvd;
        const float* gv = gl.dv.data() + (slot - gl.lo) * kvd;
        float* ak = dk[size_t(il)].data() + (slot - p0) * kvd;
        float* av = dv[size_t(il)].data() + (slot - p0) * kvd;
        for (int i = 0; i < kvd; ++i) {
          ak[i] += gk[i];
          av[i] += gv[i];
        }
      }
    }
  }

  // Through the map, layer by layer: dY = [R^T dK | dV] / n_q per transferred row, X its features,
  // dW = dY^T X.
  const TokenAlignment align = align_tokens(r, s);
  const SpanWeights weights = span_weights(align, r, s, map_.pooling);
  const ModelConfig& sc = sender.config();
  const int in_dim = map_.in_dim(), out_dim = map_.out_dim();
  SenderWindow window(sc, skv->arena(), sender_seq.blocks(), sender_seq.n_tokens(), map_.sender_window);
  std::vector<float> x(size_t(n_proj * in_dim)), dy(size_t(n_proj * out_dim)), y(size_t(n_proj * out_dim));
  std::vector<std::vector<float>> step_dir(size_t(rc.n_layer));
  std::set<int32_t> counted;  // sender layers whose rows this passage already added to its Gram
  double y2 = 0, dy2 = 0;
  for (int il = 0; il < rc.n_layer; ++il) {
    const int32_t first = map_.sender_layer[size_t(il)];
    window.load(first, pool);
    window.features(align, weights, p0, n_proj, x.data(), in_dim, pool);
    GramAccumulator& gram = grams_.at(first);
    if (counted.insert(first).second) gram.add(x.data(), n_proj);
    const Rope rope = layer_rope(rc, il);
    for (int64_t i = 0; i < n_proj; ++i) {
      float* row = dy.data() + i * out_dim;
      for (int c = 0; c < kvd; ++c) {
        row[c] = dk[size_t(il)][size_t(i * kvd + c)] / float(n_q);
        row[kvd + c] = dv[size_t(il)][size_t(i * kvd + c)] / float(n_q);
      }
      rope.apply_transposed(row, rc.n_head_kv, p0 + i);
    }
    // dW^T = X^T dY ([in][out], the ridge's layout), then D^T = (X^T X + ridge)^-1 dW^T.
    std::vector<double> dwt(size_t(in_dim) * size_t(out_dim), 0.0);
    pool.parallel_for(in_dim, 8, [&](int64_t b, int64_t e) {
      for (int64_t c = b; c < e; ++c) {
        double* row = dwt.data() + c * out_dim;
        for (int64_t i = 0; i < n_proj; ++i) {
          const double xc = x[size_t(i * in_dim + c)];
          if (xc == 0.0) continue;
          const float* d = dy.data() + i * out_dim;
          for (int o = 0; o < out_dim; ++o) row[o] += xc * double(d[o]);
        }
      }
    });
    auto dt = ridge_solve(gram.matrix(), dwt, in_dim, out_dim, opt_.ridge_alpha);
    if (!dt.ok()) return make_error("refine-transfer: receiver layer " + std::to_string(il) + ": " + dt.error());
    step_dir[size_t(il)] = transpose_matrix(*dt, in_dim, out_dim);  // [out][in], the weights' layout
    // How far D moves this passage's transferred K/V, against their size.
    const WeightView dv_view{GgmlType::F32, in_dim, out_dim, step_dir[size_t(il)].data(), size_t(in_dim) * sizeof(float)};
    matmul(dv_view, x.data(), n_proj, y.data(), pool);
    for (float v : y) dy2 += double(v) * double(v);
    map_.project_rows(il, x.data(), n_proj, y.data(), pool);
    for (float v : y) y2 += double(v) * double(v);
  }
  const double scale = dy2 > 0 ? opt_.lr * std::sqrt(y2 / dy2) : 0.0;
  for (int il = 0; il < rc.n_layer; ++il) {
    std::vector<float>& w = map_.weights[size_t(il)];
    const std::vector<float>& d = step_dir[size_t(il)];
    for (size_t i = 0; i < w.size(); ++i) w[i] = float(double(w[i]) - scale * double(d[i]));
  }
  RefineStepReport out;
  out.nll = nll / double(n_q);
  out.queries = n_q;
  out.projected_rows = n_proj;
  out.step_scale = scale;
  return out;
}

}  // namespace agentkv
