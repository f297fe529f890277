#include "transfer/paired_features.h"

#include <algorithm>
#include <cmath>

namespace agentkv {

std::string_view span_pooling_name(SpanPooling p) {
  switch (p) {
    case SpanPooling::mean: return "mean";
    case SpanPooling::overlap: return "overlap";
    case SpanPooling::last: return "last";
  }
  return "?";
}

std::optional<SpanPooling> parse_span_pooling(std::string_view name) {
  for (SpanPooling p : {SpanPooling::mean, SpanPooling::overlap, SpanPooling::last})
    if (name == span_pooling_name(p)) return p;
  return std::nullopt;
}

SpanWeights span_weights(const TokenAlignment& alignment, const TokenSpans& receiver, const TokenSpans& sender,
                         SpanPooling pooling) {
  SpanWeights out;
  out.pooling = pooling;
  out.offset.resize(alignment.size() + 1, 0);
  for (size_t r = 0; r < alignment.size(); ++r) out.offset[r + 1] = out.offset[r] + alignment.count[r];
  out.w.assign(size_t(out.offset.back()), 0.0f);
  for (size_t r = 0; r < alignment.size(); ++r) {
    const int32_t first = alignment.first[r], count = alignment.count[r];
    if (count == 0) continue;
    float* w = out.w.data() + out.offset[r];
    switch (pooling) {
      case SpanPooling::mean:
        for (int32_t i = 0; i < count; ++i) w[i] = 1.0f / float(count);
        break;
      case SpanPooling::last:
        w[count - 1] = 1.0f;
        break;
      case SpanPooling::overlap: {
        double total = 0;
        for (int32_t i = 0; i < count; ++i) {
          const size_t s = size_t(first + i);
          const size_t b = std::max(receiver.begin[r], sender.begin[s]), e = std::min(receiver.end[r], sender.end[s]);
          w[i] = e > b ? float(e - b) : 0.0f;
          total += w[i];
        }
        // align_tokens only puts overlapping tokens in a run, so total > 0; should a tokenizer's
        // spans ever leave a gap there, the uniform weights are the safe reading.
        for (int32_t i = 0; i < count; ++i) w[i] = total > 0 ? float(w[i] / total) : 1.0f / float(count);
        break;
      }
    }
  }
  return out;
}

void pooled_sender_features(const LayerKv& sender, const TokenAlignment& alignment, const SpanWeights& weights,
                            size_t receiver_token, float* x) {
  const int32_t first = alignment.first[receiver_token], count = alignment.count[receiver_token];
  AGENTKV_CHECK(count > 0 && first + count <= sender.n_tokens);
  const float* w = weights.w.data() + weights.offset[receiver_token];
  const int d = sender.kv_dim;
  for (int i = 0; i < 2 * d; ++i) x[i] = 0.0f;
  if (weights.pooling == SpanPooling::mean) {
    // Sum, then scale once: the summation order the maps fitted before the other rules existed saw.
    for (int32_t s = first; s < first + count; ++s) {
      const float* k = sender.k_row(s);
      const float* v = sender.v_row(s);
      for (int i = 0; i < d; ++i) {
        x[i] += k[i];
        x[d + i] += v[i];
      }
    }
    const float inv = 1.0f / float(count);
    for (int i = 0; i < 2 * d; ++i) x[i] *= inv;
    x[2 * d] = 1.0f;
    return;
  }
  for (int32_t j = 0; j < count; ++j) {
    if (w[j] == 0.0f) continue;
    const float* k = sender.k_row(first + j);
    const float* v = sender.v_row(first + j);
    for (int i = 0; i < d; ++i) {
      x[i] += w[j] * k[i];
      x[d + i] += w[j] * v[i];
    }
  }
  x[2 * d] = 1.0f;
}

void pooled_sender_window_features(std::span<const LayerKv* const> layers, const TokenAlignment& alignment,
                                   const SpanWeights& weights, size_t receiver_token, float* x) {
  AGENTKV_CHECK(!layers.empty());
  // Each layer writes its bias after its K/V; the next layer's K/V overwrite it, the last one's stays.
  for (const LayerKv* l : layers) {
    pooled_sender_features(*l, alignment, weights, receiver_token, x);
    x += 2 * l->kv_dim;
  }
}

SenderWindow::SenderWindow(const ModelConfig& sender, const KvArena& arena, std::span<const int32_t> table,
                           int64_t n_tokens, int window)
    : cfg_(sender),
      arena_(arena),
      table_(table),
      ropes_(sender, RopeTable::Direction::kUnapply, n_tokens),
      layers_(size_t(window)),
      loaded_(size_t(window), -1) {
  for (LayerKv& layer : layers_) {
    layer.n_tokens = n_tokens;
    layer.kv_dim = sender.kv_dim();
    layer.k.resize(size_t(layer.n_tokens * layer.kv_dim));
    layer.v.resize(layer.k.size());
    view_.push_back(&layer);
  }
}

void SenderWindow::load(int32_t first, ThreadPool& pool) {
  constexpr int64_t kGrain = 32;
  for (size_t j = 0; j < layers_.size(); ++j) {
    const int32_t want = first + int32_t(j);
    if (want == loaded_[j]) continue;
    LayerKv& layer = layers_[j];
    const RopeTable& rope = ropes_.layer(want);
    pool.parallel_for(layer.n_tokens, kGrain, [&](int64_t b, int64_t e) {
      read_unrotated_rows(cfg_, arena_, table_, want, b, e, layer, &rope);
    });
    loaded_[j] = want;
  }
}

void SenderWindow::features(const TokenAlignment& alignment, const SpanWeights& weights, int64_t first_token, int64_t n,
                            float* x, int64_t row_stride, ThreadPool& pool) const {
  std::vector<int64_t> tokens(size_t(std::max<int64_t>(n, 0)));
  std::iota(tokens.begin(), tokens.end(), first_token);
  features(alignment, weights, tokens, x, row_stride, pool);
}

void SenderWindow::features(const TokenAlignment& alignment, const SpanWeights& weights,
                            std::span<const int64_t> tokens, float* x, int64_t row_stride, ThreadPool& pool) const {
  constexpr int64_t kGrain = 32;
  pool.parallel_for(int64_t(tokens.size()), kGrain, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i)
      pooled_sender_window_features(view_, alignment, weights, size_t(tokens[size_t(i)]), x + i * row_stride);
  });
}

void receiver_hidden_features(const float* h, int dim, float* x) {
  double ss = 0;
  for (int i = 0; i < dim; ++i) ss += double(h[i]) * double(h[i]);
  const float inv = dim > 0 ? float(1.0 / std::sqrt(ss / dim + 1e-6)) : 0.0f;
  for (int i = 0; i < dim; ++i) x[i] = h[i] * inv;
}

}  // namespace agentkv
