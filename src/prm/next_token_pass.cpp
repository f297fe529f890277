#include "prm/next_token_pass.h"

#include <algorithm>
#include <cmath>

#include "ops/float_matvec.h"
#include "ops/norm.h"
#include "prm/verify_pass_record.h"

namespace agentkv::prm {

Result<double> next_token_nll(const Model& model, const VerifyContext& ctx, int32_t token, int32_t target,
                              CachedKvGradient* grad, ThreadPool& pool) {
  const ModelConfig& c = model.config();
  if (token < 0 || token >= c.n_vocab || target < 0 || target >= c.n_vocab)
    return make_error("next-token pass: token " + std::to_string(token) + " or target " + std::to_string(target) +
                      " outside the vocabulary of " + std::to_string(c.n_vocab));
  AGENTKV_TRY(check_context_slots(ctx, "next-token pass"));
  const DecoderWeights& w = model.weights();
  const int d = c.n_embd;
  const PassRecord rec = forward_blocks(model, ctx, token, nullptr, pool);
  std::vector<float> xf(static_cast<size_t>(d));
  rms_norm(rec.x_final.data(), w.out_norm, xf.data(), d, c.rms_eps);
  std::vector<float> z(static_cast<size_t>(c.n_vocab));
  matvec_f32(w.head, xf.data(), z.data(), pool);
  // Softcapped logits zc; the softmax over them, in double.
  std::vector<double> zc(z.size());
  for (size_t v = 0; v < z.size(); ++v)
    zc[v] = c.final_softcap > 0.0f ? c.final_softcap * std::tanh(double(z[v]) / c.final_softcap) : double(z[v]);
  const double mx = *std::max_element(zc.begin(), zc.end());
  double sum = 0;
  for (double x : zc) sum += std::exp(x - mx);
  const double log_z = mx + std::log(sum);
  const double nll = log_z - zc[size_t(target)];
  if (!grad) return nll;
  // dnll/dzc = softmax - onehot(target), through the softcap, the head and the final norm.
  std::vector<float> dz(z.size());
  for (size_t v = 0; v < z.size(); ++v) {
    double g = std::exp(zc[v] - log_z) - (int32_t(v) == target ? 1.0 : 0.0);
    if (c.final_softcap > 0.0f) {
      const double t = zc[v] / c.final_softcap;
      g *= 1.0 - t * t;
    }
    dz[v] = float(g);
  }
  std::vector<float> dxf(static_cast<size_t>(d), 0.0f), dx(static_cast<size_t>(d), 0.0f);
  matvec_transposed_add_f32(w.head, dz.data(), dxf.data(), pool);
  rms_norm_backward(rec.x_final.data(), w.out_norm, dxf.data(), dx.data(), d, c.rms_eps);
  backward_blocks(model, ctx, nullptr, rec, std::move(dx), nullptr, grad, pool);
  return nll;
}

}  // namespace agentkv::prm
