// What the verifier's training forward (verify_pass.cpp) records for its backward
// (verify_backward.cpp), and the pieces both halves compute the same way. Internal to src/prm/.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "model/transformer_parts.h"
#include "prm/next_token_pass.h"
#include "prm/verify_pass.h"

namespace agentkv::prm {

// One block's activations for the verify token.
struct LayerRecord {
  std::vector<float> x_in;        // the residual stream entering the block
  std::vector<float> h;           // attention norm's output
  std::vector<float> q0, k0, v;   // projections (+ biases), before the Q/K norms
  std::vector<float> qs, kr;      // Q and K as attention reads them (normed, rotated, Q scaled)
  std::vector<float> probs;       // [n_head][n_attended]: cached slots [lo, n_slots), then its own
  std::vector<float> att;         // attention output, [q_dim]
  std::vector<float> o;           // output projection, before a post-attention norm
  std::vector<float> x_mid;       // the residual stream after attention
  std::vector<float> h2;          // FFN norm's output
  std::vector<float> gate, up, act;  // act = act(gate) * up
  std::vector<float> dn;          // down projection, before a post-FFN norm
  int64_t lo = 0;                 // first cached slot attended (sliding window)
};

struct PassRecord {
  std::vector<LayerRecord> layers;
  std::vector<float> x_final;  // the residual stream after the last block
  double z[2] = {};            // head logits of "+" and "-" before a final softcap
  double zc[2] = {};           // and after
  double logodds = 0;
};

struct LossValue {
  double p = 0;
  double loss = 0;
  double dlogodds = 0;
};

double ffn_act(FfnActivation a, double g);
double ffn_act_grad(FfnActivation a, double g);
// Rows r of w dequantized into row ([w.cols]).
void weight_row(const WeightView& w, int64_t r, float* row);
// K and V of cached slots [lo, ctx.n_slots) of layer il, [slots][kv_dim] each, as f32.
void load_cached_kv(const VerifyContext& ctx, int il, int64_t lo, std::vector<float>& k, std::vector<float>& v);

// Fails, naming `who`, when the context's slots are outside its blocks.
Status check_context_slots(const VerifyContext& ctx, const char* who);
// What every pass checks first: the adapters' and gradient's shape, the head's tokens, the target,
// the context's slots.
Status check_pass_inputs(const Model& model, const VerifyContext& ctx, const VerifyHead& head,
                         const LoraAdapters& adapters, double target, const LoraAdapters* grad);
// `token` at position ctx.n_slots through every block (adapters: null for none); the head is the caller's.
// The _many forms run a batch of examples (context and token each) together, each weight row
// dequantized once for all of them; every example's record is the same bit for bit as its own pass's.
std::vector<PassRecord> forward_blocks_many(const Model& model, std::span<const VerifyContext* const> ctxs,
                                            std::span<const int32_t> tokens, const LoraAdapters* adapters,
                                            ThreadPool& pool);
PassRecord forward_blocks(const Model& model, const VerifyContext& ctx, int32_t token, const LoraAdapters* adapters,
                          ThreadPool& pool);
// forward_blocks of the head's last token, then the head's two logits.
std::vector<PassRecord> forward_pass_many(const Model& model, std::span<const VerifyContext* const> ctxs,
                                          const VerifyHead& head, const LoraAdapters& adapters, ThreadPool& pool);
PassRecord forward_pass(const Model& model, const VerifyContext& ctx, const VerifyHead& head,
                        const LoraAdapters& adapters, ThreadPool& pool);
LossValue verify_loss(double logodds, double target, VerifyLoss loss);
// From dx = dloss/d(the last block's output) through every block in reverse: adds dloss/dparameters
// into grad (non-null when adapters are) and, when `cached` is non-null, sets dloss/d(cached K and V).
void backward_blocks(const Model& model, const VerifyContext& ctx, const LoraAdapters* adapters, const PassRecord& rec,
                     std::vector<float> dx, LoraAdapters* grad, CachedKvGradient* cached, ThreadPool& pool);
// backward_pass for a batch: every example's gradient added into grad in example order, per
// parameter, as one backward_pass after another would add them (the same bits).
void backward_pass_many(const Model& model, std::span<const VerifyContext* const> ctxs, const VerifyHead& head,
                        const LoraAdapters& adapters, std::span<const PassRecord* const> recs,
                        std::span<const double> dlogodds, LoraAdapters& grad, ThreadPool& pool);
// Adds dloss/dparameters into grad, given dloss/dlogodds.
void backward_pass(const Model& model, const VerifyContext& ctx, const VerifyHead& head, const LoraAdapters& adapters,
                   const PassRecord& rec, double dlogodds, LoraAdapters& grad, ThreadPool& pool);

}  // namespace agentkv::prm
