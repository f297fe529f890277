#include "lab/transfer/transfer_fit.h"

#include <algorithm>

#include "transfer/paired_features.h"
#include "transfer/token_alignment.h"

namespace agentkv {

TransferFitter::TransferFitter(const LoadedModel& sender, const LoadedModel& receiver, TransferFitOptions opt)
    : sender_(sender), receiver_(receiver), opt_(opt) {
  opt_.sender_window = std::clamp(opt_.sender_window, 1, sender.config().n_layer);
  sender_layer_ = sender_layer_windows(receiver.config().n_layer, sender.config().n_layer, opt_.sender_window);
  const int in_dim = opt_.sender_window * 2 * sender.config().kv_dim() + 1 + hidden_dim(),
            out_dim = 2 * receiver.config().kv_dim();
  for (int32_t s : sender_layer_) grams_.try_emplace(s, in_dim);
  for (size_t l = 0; l < sender_layer_.size(); ++l) cross_.emplace_back(in_dim, out_dim);
  if (!opt_.alpha_grid.empty()) {
    for (int32_t s : sender_layer_) heldout_grams_.try_emplace(s, in_dim);
    for (size_t l = 0; l < sender_layer_.size(); ++l) heldout_cross_.emplace_back(in_dim, out_dim);
    heldout_yy_.assign(sender_layer_.size(), 0.0);
  }
}

Status TransferFitter::add_passage(std::string_view text, ThreadPool& pool) {
  TokenSpans s, r;
  AGENTKV_ASSIGN_OR_RETURN(s, tokenize_with_spans(*sender_.tokenizer, text, sender_.tokenizer->add_bos_default()));
  AGENTKV_ASSIGN_OR_RETURN(r, tokenize_with_spans(*receiver_.tokenizer, text, receiver_.tokenizer->add_bos_default()));
  // What the map sees of each receiver token (the text's, not BOS), for the hybrid by rarity.
  if (token_counts_.empty()) token_counts_.assign(size_t(receiver_.config().n_vocab), 0);
  for (size_t t = receiver_.tokenizer->add_bos_default() ? 1 : 0; t < r.size(); ++t) ++token_counts_[size_t(r.tokens[t])];
  const TokenAlignment align = align_tokens(r, s);
  const SpanWeights weights = span_weights(align, r, s, opt_.pooling);
  std::vector<size_t> rows;
  for (size_t t = size_t(std::max(0, opt_.native_prefix)); t < r.size(); ++t)
    if (align.count[t] > 0) rows.push_back(t);
  if (rows.empty()) return Status::ok_status();
  std::vector<LayerKv> skv, rkv;
  AGENTKV_ASSIGN_OR_RETURN(skv, compute_unrotated_kv(*sender_.model, s.tokens, pool));
  std::vector<float> hidden;
  const int hd = hidden_dim();
  AGENTKV_ASSIGN_OR_RETURN(rkv, compute_unrotated_kv(*receiver_.model, r.tokens, pool, hd ? &hidden : nullptr,
                                                     opt_.receiver_hidden_layers));
  const int sender_in = opt_.sender_window * 2 * sender_.config().kv_dim() + 1, in_dim = sender_in + hd;
  const int rd = receiver_.config().kv_dim(), out_dim = 2 * rd;
  const int64_t n = int64_t(rows.size());
  // A held-out passage feeds the held-out accumulators instead (alpha grid only).
  const bool heldout = !opt_.alpha_grid.empty() && opt_.holdout_every > 1 &&
                       n_passages_++ % opt_.holdout_every == opt_.holdout_every - 1;
  std::map<int32_t, GramAccumulator>& grams_in = heldout ? heldout_grams_ : grams_;
  std::vector<CrossAccumulator>& cross_in = heldout ? heldout_cross_ : cross_;
  // Features per sender layer that some receiver layer uses, built once.
  std::map<int32_t, std::vector<float>> x;
  for (auto& [sl, gram] : grams_in) {
    std::vector<float>& xs = x[sl];
    xs.resize(size_t(n * in_dim));
    std::vector<const LayerKv*> window;
    for (int j = 0; j < opt_.sender_window; ++j) window.push_back(&skv[size_t(sl + j)]);
    for (int64_t i = 0; i < n; ++i) {
      pooled_sender_window_features(window, align, weights, rows[size_t(i)], xs.data() + i * in_dim);
      if (hd) receiver_hidden_features(hidden.data() + rows[size_t(i)] * size_t(hd), hd, xs.data() + i * in_dim + sender_in);
    }
  }
  // Every Gram and cross matrix is independent of the others: spread them over the pool's threads.
  std::vector<std::pair<const float*, GramAccumulator*>> grams;
  for (auto& [sl, gram] : grams_in) grams.emplace_back(x[sl].data(), &gram);
  pool.run([&](int ti, int nt) {
    for (size_t g = size_t(ti); g < grams.size(); g += size_t(nt)) grams[g].second->add(grams[g].first, n);
    std::vector<float> y(size_t(n * out_dim));
    for (size_t l = size_t(ti); l < cross_in.size(); l += size_t(nt)) {
      // A conditioned map's first layers are the receiver's own: nothing to fit (their W stays 0).
      if (int(l) < opt_.receiver_hidden_layers) continue;
      const LayerKv& rl = rkv[l];
      for (int64_t i = 0; i < n; ++i) {
        const int64_t t = int64_t(rows[size_t(i)]);
        std::copy(rl.k_row(t), rl.k_row(t) + rd, y.begin() + i * out_dim);
        std::copy(rl.v_row(t), rl.v_row(t) + rd, y.begin() + i * out_dim + rd);
      }
      cross_in[l].add(x.at(sender_layer_[l]).data(), y.data(), n);
      if (heldout)
        for (float v : y) heldout_yy_[l] += double(v) * double(v);
    }
  });
  (heldout ? n_heldout_rows_ : n_rows_) += n;
  return Status::ok_status();
}

namespace {

std::vector<double> plus(std::vector<double> a, const std::vector<double>& b) {
  for (size_t i = 0; i < a.size(); ++i) a[i] += b[i];
  return a;
}

}  // namespace

Result<TransferMap> TransferFitter::solve(AlphaChoice* choice) const {
  if (n_rows_ == 0) return make_error("fit-transfer: no calibration rows (empty corpus?)");
  const bool choosing = !opt_.alpha_grid.empty();
  if (choosing && n_heldout_rows_ == 0)
    return make_error("fit-transfer: no held-out rows to choose the ridge by (fewer than " +
                      std::to_string(opt_.holdout_every) + " passages?)");
  AlphaChoice made;
  made.n_heldout_rows = n_heldout_rows_;
  TransferMap map;
  map.sender_fingerprint = sender_.fingerprint;
  map.receiver_fingerprint = receiver_.fingerprint;
  map.sender_name = sender_.name;
  map.receiver_name = receiver_.name;
  map.sender_n_layer = sender_.config().n_layer;
  map.sender_kv_dim = sender_.config().kv_dim();
  map.receiver_n_layer = receiver_.config().n_layer;
  map.receiver_kv_dim = receiver_.config().kv_dim();
  map.receiver_hidden_layers = opt_.receiver_hidden_layers;
  map.receiver_hidden_dim = hidden_dim();
  map.sender_layer = sender_layer_;
  map.sender_window = opt_.sender_window;
  map.ridge_alpha = opt_.ridge_alpha;
  map.pooling = opt_.pooling;
  map.n_fit_tokens = n_rows_ + n_heldout_rows_;
  map.receiver_token_counts = token_counts_;
  for (size_t l = 0; l < cross_.size(); ++l) {
    const GramAccumulator& g = grams_.at(sender_layer_[l]);
    const int n = g.n_in(), m = cross_[l].n_out();
    const auto layer_error = [&](const std::string& what) { return "fit-transfer: receiver layer " + std::to_string(l) + ": " + what; };
    double alpha = opt_.ridge_alpha;
    std::vector<double> gram = g.matrix(), xy = cross_[l].matrix();
    if (choosing) {
      const std::vector<double> gh = heldout_grams_.at(sender_layer_[l]).matrix();
      const std::vector<double>& bh = heldout_cross_[l].matrix();
      std::vector<double> errors;
      for (double a : opt_.alpha_grid) {
        auto w = ridge_solve(gram, xy, n, m, a);
        if (!w.ok()) return make_error(layer_error(w.error()));
        errors.push_back(squared_error_from_moments(*w, gh, bh, heldout_yy_[l], n, m) / std::max(heldout_yy_[l], 1e-30));
      }
      alpha = opt_.alpha_grid[size_t(std::min_element(errors.begin(), errors.end()) - errors.begin())];
      made.heldout_error.push_back(std::move(errors));
      made.alpha.push_back(alpha);
      // The chosen alpha, refitted on every passage.
      gram = plus(std::move(gram), gh);
      xy = plus(std::move(xy), bh);
    }
    auto solved = ridge_solve(std::move(gram), xy, n, m, alpha);
    if (!solved.ok()) return make_error(layer_error(solved.error()));
    // ridge_solve gives [in][out]; the map holds one row per output (transfer_map.h).
    map.weights.push_back(transpose_matrix(*solved, n, m));
  }
  if (choosing) {
    map.layer_alpha = made.alpha;
    if (choice) *choice = std::move(made);
  }
  return map;
}

}  // namespace agentkv
