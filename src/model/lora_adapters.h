// Low-rank adapters (LoRA) on every block's seven projections: y = W x + scale * B (A x), with A
// [rank][in] and B [out][rank]. They are optional state beside the immutable weights: a Batch that
// carries them applies them to its logit-row tokens only (a verifier's verify token, model/batch.h),
// so every other token, and every K/V a policy reuses, comes from the base weights. All parameters
// live in one flat vector so an optimizer, a checksum or a gradient of the same shape treats them
// as one array.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "model/model_config.h"
#include "ops/matmul.h"
#include "util/thread_pool.h"

namespace agentkv {

enum class LoraProj : int { kQ, kK, kV, kO, kGate, kUp, kDown };
inline constexpr int kLoraProjections = 7;

class LoraAdapters {
 public:
  // A drawn uniformly in +-1/sqrt(in) (PEFT's Kaiming default) from `seed`, B = 0: the adapted model
  // starts equal to the base one. scale = alpha / rank.
  static LoraAdapters create(const ModelConfig& cfg, int rank, float alpha, uint64_t seed);
  // Every parameter zero, with this exact scale (what a file holds).
  static LoraAdapters zeros(const ModelConfig& cfg, int rank, float scale);
  // The same shape, every parameter zero (a gradient accumulator).
  LoraAdapters zeros_like() const;

  int rank() const { return rank_; }
  int n_layer() const { return n_layer_; }
  float scale() const { return scale_; }
  int in_dim(LoraProj p) const { return in_[int(p)]; }
  int out_dim(LoraProj p) const { return out_[int(p)]; }
  // True when the adapters were made for a model of this geometry.
  bool fits(const ModelConfig& cfg) const;

  float* a(int il, LoraProj p) { return params_.data() + offset(il, p); }
  const float* a(int il, LoraProj p) const { return params_.data() + offset(il, p); }
  float* b(int il, LoraProj p) { return a(il, p) + size_t(rank_) * size_t(in_[int(p)]); }
  const float* b(int il, LoraProj p) const { return a(il, p) + size_t(rank_) * size_t(in_[int(p)]); }

  std::span<float> params() { return params_; }
  std::span<const float> params() const { return params_; }

  // A and B as F32 weight matrices ([rank][in], [out][rank]) for the matmul kernels.
  WeightView a_view(int il, LoraProj p) const;
  WeightView b_view(int il, LoraProj p) const;

  // y[t] += scale * B A x[t] for each token t in `rows`; x is [n][in], y is [n][out]. Both products
  // run on the F32 matmul kernels in batch-invariant mode (a token's delta does not depend on the
  // other rows), whose activations stay f32, so the delta is smooth in A and B. With B = 0 it adds
  // exact zeros: the outputs stay bit for bit the base model's.
  void add_delta(int il, LoraProj p, const float* x, std::span<const int32_t> rows, float* y, ThreadPool& pool) const;
  // The gradient of add_delta for one row: given dy = dloss/dy, adds dloss/dA and dloss/dB into the
  // same projection of `grad` (same shape) and A^T (scale B^T dy) into dx (may be null).
  void backward(int il, LoraProj p, const float* x, const float* dy, LoraAdapters& grad, float* dx,
                ThreadPool& pool) const;

 private:
  size_t offset(int il, LoraProj p) const { return size_t(il) * layer_size_ + proj_offset_[int(p)]; }

  int rank_ = 0;
  int n_layer_ = 0;
  float scale_ = 1.0f;
  int in_[kLoraProjections] = {};
  int out_[kLoraProjections] = {};
  size_t proj_offset_[kLoraProjections] = {};
  size_t layer_size_ = 0;
  std::vector<float> params_;
};

}  // namespace agentkv
