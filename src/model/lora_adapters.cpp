#include "model/lora_adapters.h"

#include <algorithm>
#include <cmath>

#include "util/status.h"

namespace agentkv {
namespace {

// splitmix64: a fixed generator, so the same seed gives the same adapters on every platform.
uint64_t next_random(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

}  // namespace

LoraAdapters LoraAdapters::zeros(const ModelConfig& cfg, int rank, float scale) {
  AGENTKV_CHECK(rank > 0 && cfg.n_layer > 0 && scale > 0);
  LoraAdapters l;
  l.rank_ = rank;
  l.n_layer_ = cfg.n_layer;
  l.scale_ = scale;
  const int d = cfg.n_embd, q = cfg.q_dim(), kv = cfg.kv_dim(), ff = cfg.n_ff;
  const int in[kLoraProjections] = {d, d, d, q, d, d, ff};
  const int out[kLoraProjections] = {q, kv, kv, d, ff, ff, d};
  size_t off = 0;
  for (int p = 0; p < kLoraProjections; ++p) {
    l.in_[p] = in[p];
    l.out_[p] = out[p];
    l.proj_offset_[p] = off;
    off += size_t(rank) * size_t(in[p] + out[p]);
  }
  l.layer_size_ = off;
  l.params_.assign(off * size_t(cfg.n_layer), 0.0f);
  return l;
}

LoraAdapters LoraAdapters::create(const ModelConfig& cfg, int rank, float alpha, uint64_t seed) {
  AGENTKV_CHECK(alpha > 0);
  LoraAdapters l = zeros(cfg, rank, alpha / float(rank));
  uint64_t state = seed;
  for (int il = 0; il < cfg.n_layer; ++il)
    for (int p = 0; p < kLoraProjections; ++p) {
      const int in = l.in_[p];
      const float bound = 1.0f / std::sqrt(float(in));
      float* a = l.a(il, LoraProj(p));
      for (size_t i = 0; i < size_t(rank) * size_t(in); ++i) {
        const double u = double(next_random(state) >> 11) * 0x1.0p-53;  // [0, 1)
        a[i] = float((2.0 * u - 1.0) * bound);
      }
    }
  return l;
}

LoraAdapters LoraAdapters::zeros_like() const {
  LoraAdapters z = *this;
  std::fill(z.params_.begin(), z.params_.end(), 0.0f);
  return z;
}

bool LoraAdapters::fits(const ModelConfig& cfg) const {
  return n_layer_ == cfg.n_layer && in_[int(LoraProj::kQ)] == cfg.n_embd && out_[int(LoraProj::kQ)] == cfg.q_dim() &&
         out_[int(LoraProj::kK)] == cfg.kv_dim() && out_[int(LoraProj::kGate)] == cfg.n_ff;
}

WeightView LoraAdapters::a_view(int il, LoraProj p) const {
  const int in = in_[int(p)];
  return WeightView{GgmlType::F32, in, rank_, a(il, p), size_t(in) * sizeof(float)};
}

WeightView LoraAdapters::b_view(int il, LoraProj p) const {
  return WeightView{GgmlType::F32, rank_, out_[int(p)], b(il, p), size_t(rank_) * sizeof(float)};
}

void LoraAdapters::add_delta(int il, LoraProj p, const float* x, std::span<const int32_t> rows, float* y,
                             ThreadPool& pool) const {
  if (rows.empty()) return;
  const size_t in = size_t(in_[int(p)]), out = size_t(out_[int(p)]), n = rows.size();
  std::vector<float> xs(n * in), u(n * size_t(rank_)), delta(n * out);
  for (size_t i = 0; i < n; ++i) std::copy_n(x + size_t(rows[i]) * in, in, xs.data() + i * in);
  matmul(a_view(il, p), xs.data(), int64_t(n), u.data(), pool, 0);
  matmul(b_view(il, p), u.data(), int64_t(n), delta.data(), pool, 0);
  for (size_t i = 0; i < n; ++i) {
    float* yt = y + size_t(rows[i]) * out;
    for (size_t o = 0; o < out; ++o) yt[o] += scale_ * delta[i * out + o];
  }
}

void LoraAdapters::backward(int il, LoraProj p, const float* x, const float* dy, LoraAdapters& grad, float* dx,
                            ThreadPool& pool) const {
  const int in = in_[int(p)], out = out_[int(p)];
  const size_t r_n = size_t(rank_);
  std::vector<float> u(r_n);
  std::vector<double> du(r_n, 0.0);
  matmul(a_view(il, p), x, 1, u.data(), pool, 0);  // as add_delta computed it
  const float* b_rows = b(il, p);
  float* gb = grad.b(il, p);
  for (int o = 0; o < out; ++o) {
    const double g = double(scale_) * double(dy[o]);
    if (g == 0.0) continue;
    const float* br = b_rows + size_t(o) * r_n;
    float* gbr = gb + size_t(o) * r_n;
    for (size_t r = 0; r < r_n; ++r) {
      gbr[r] += float(g * double(u[r]));
      du[r] += g * double(br[r]);
    }
  }
  const float* a_rows = a(il, p);
  float* ga = grad.a(il, p);
  for (size_t r = 0; r < r_n; ++r) {
    if (du[r] == 0.0) continue;
    float* gar = ga + r * size_t(in);
    for (int i = 0; i < in; ++i) gar[i] += float(du[r] * double(x[i]));
  }
  if (!dx) return;
  std::vector<double> acc(static_cast<size_t>(in), 0.0);
  for (size_t r = 0; r < r_n; ++r) {
    const float* ar = a_rows + r * size_t(in);
    for (int i = 0; i < in; ++i) acc[size_t(i)] += double(ar[i]) * du[r];
  }
  for (int i = 0; i < in; ++i) dx[i] += float(acc[size_t(i)]);
}

}  // namespace agentkv
