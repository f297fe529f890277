// A model's next-token loss over a frozen cache, differentiable in the cache: one token at position
// ctx.n_slots runs every block (the verifier's training pass, verify_pass.h, without adapters)
// attending to the cached slots, its NLL of `target` over the whole vocabulary is the loss, and the
// gradient flows back into the cached K and V it read. What a transfer map is refined by
// (lab/transfer/transfer_refine.h): the gradient of a continuation's NLL with respect to the
// transferred K/V, chained through the map.
#pragma once

#include <cstdint>
#include <vector>

#include "model/model.h"
#include "prm/verify_pass.h"
#include "util/status.h"
#include "util/thread_pool.h"

namespace agentkv::prm {

// dloss / d(cached K and V) of every block: for each, the first slot the token attended (a sliding
// window's lower edge) and the gradients of slots [lo, n_slots), [slot - lo][kv_dim], K as the cache
// holds it (after the K norm, rotated to its slot's position).
struct CachedKvGradient {
  struct Layer {
    int64_t lo = 0;
    std::vector<float> dk, dv;
  };
  std::vector<Layer> layers;
};

// -log p(target | the cache, token) under the model's own softmax (after a final logit softcap where
// the family has one). With grad non-null, sets it (not added to). Fails on a token or target outside
// the vocabulary or slots outside the context's blocks.
Result<double> next_token_nll(const Model& model, const VerifyContext& ctx, int32_t token, int32_t target,
                              CachedKvGradient* grad, ThreadPool& pool);

}  // namespace agentkv::prm
