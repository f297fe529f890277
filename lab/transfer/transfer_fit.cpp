#include "lab/transfer/transfer_fit.h"

#include <algorithm>

#include "transfer/paired_features.h"
#include "transfer/token_alignment.h"

namespace agentkv {

TransferFitter::TransferFitter(const LoadedModel& sender, const LoadedModel& receiver, TransferFitOptions opt)
    : sender_(sender), receiver_(receiver), opt_(opt) {
  sender_layer_ = depth_proportional_layers(receiver.config().n_layer, sender.config().n_layer);
  const int in_dim = 2 * sender.config().kv_dim() + 1, out_dim = 2 * receiver.config().kv_dim();
  for (int32_t s : sender_layer_) grams_.try_emplace(s, in_dim);
  for (size_t l = 0; l < sender_layer_.size(); ++l) cross_.emplace_back(in_dim, out_dim);
}

Status TransferFitter::add_passage(std::string_view text, ThreadPool& pool) {
  TokenSpans s, r;
  AGENTKV_ASSIGN_OR_RETURN(s, tokenize_with_spans(*sender_.tokenizer, text, sender_.tokenizer->add_bos_default()));
  AGENTKV_ASSIGN_OR_RETURN(r, tokenize_with_spans(*receiver_.tokenizer, text, receiver_.tokenizer->add_bos_default()));
  const TokenAlignment align = align_tokens(r, s);
  const SpanWeights weights = span_weights(align, r, s, opt_.pooling);
  std::vector<size_t> rows;
  for (size_t t = size_t(std::max(0, opt_.native_prefix)); t < r.size(); ++t)
    if (align.count[t] > 0) rows.push_back(t);
  if (rows.empty()) return Status::ok_status();
  std::vector<LayerKv> skv, rkv;
  AGENTKV_ASSIGN_OR_RETURN(skv, compute_unrotated_kv(*sender_.model, s.tokens, pool));
  AGENTKV_ASSIGN_OR_RETURN(rkv, compute_unrotated_kv(*receiver_.model, r.tokens, pool));
  const int in_dim = 2 * sender_.config().kv_dim() + 1;
  const int rd = receiver_.config().kv_dim(), out_dim = 2 * rd;
  const int64_t n = int64_t(rows.size());
  // Features per sender layer that some receiver layer uses, built once.
  std::map<int32_t, std::vector<float>> x;
  for (auto& [sl, gram] : grams_) {
    std::vector<float>& xs = x[sl];
    xs.resize(size_t(n * in_dim));
    for (int64_t i = 0; i < n; ++i) pooled_sender_features(skv[size_t(sl)], align, weights, rows[size_t(i)], xs.data() + i * in_dim);
  }
  // Every Gram and cross matrix is independent of the others: spread them over the pool's threads.
  std::vector<std::pair<const float*, GramAccumulator*>> grams;
  for (auto& [sl, gram] : grams_) grams.emplace_back(x[sl].data(), &gram);
  pool.run([&](int ti, int nt) {
    for (size_t g = size_t(ti); g < grams.size(); g += size_t(nt)) grams[g].second->add(grams[g].first, n);
    std::vector<float> y(size_t(n * out_dim));
    for (size_t l = size_t(ti); l < cross_.size(); l += size_t(nt)) {
      const LayerKv& rl = rkv[l];
      for (int64_t i = 0; i < n; ++i) {
        const int64_t t = int64_t(rows[size_t(i)]);
        std::copy(rl.k_row(t), rl.k_row(t) + rd, y.begin() + i * out_dim);
        std::copy(rl.v_row(t), rl.v_row(t) + rd, y.begin() + i * out_dim + rd);
      }
      cross_[l].add(x.at(sender_layer_[l]).data(), y.data(), n);
    }
  });
  n_rows_ += n;
  return Status::ok_status();
}

Result<TransferMap> TransferFitter::solve() const {
  if (n_rows_ == 0) return make_error("fit-transfer: no calibration rows (empty corpus?)");
  TransferMap map;
  map.sender_fingerprint = sender_.fingerprint;
  map.receiver_fingerprint = receiver_.fingerprint;
  map.sender_name = sender_.name;
  map.receiver_name = receiver_.name;
  map.sender_n_layer = sender_.config().n_layer;
  map.sender_kv_dim = sender_.config().kv_dim();
  map.receiver_n_layer = receiver_.config().n_layer;
  map.receiver_kv_dim = receiver_.config().kv_dim();
  map.sender_layer = sender_layer_;
  map.ridge_alpha = opt_.ridge_alpha;
  map.pooling = opt_.pooling;
  map.n_fit_tokens = n_rows_;
  for (size_t l = 0; l < cross_.size(); ++l) {
    const GramAccumulator& g = grams_.at(sender_layer_[l]);
    auto solved = ridge_solve(g.matrix(), cross_[l].matrix(), g.n_in(), cross_[l].n_out(), opt_.ridge_alpha);
    if (!solved.ok()) return make_error("fit-transfer: receiver layer " + std::to_string(l) + ": " + solved.error());
    // ridge_solve gives [in][out]; the map holds one row per output (transfer_map.h).
    map.weights.push_back(transpose_matrix(*solved, g.n_in(), cross_[l].n_out()));
  }
  return map;
}

}  // namespace agentkv
