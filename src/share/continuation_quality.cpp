#include "share/continuation_quality.h"

#include <algorithm>
#include <cmath>

#include "kv/direct_prefill.h"
#include "ops/argmax.h"

namespace agentkv {

namespace {

// log-softmax of one row, in double (KL of nearly equal distributions is a small difference of
// large terms).
std::vector<double> log_softmax(const float* logits, int n) {
  double mx = -INFINITY;
  for (int i = 0; i < n; ++i) mx = std::max(mx, double(logits[i]));
  double sum = 0;
  for (int i = 0; i < n; ++i) sum += std::exp(double(logits[i]) - mx);
  const double lz = mx + std::log(sum);
  std::vector<double> out(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) out[size_t(i)] = double(logits[i]) - lz;
  return out;
}


}  // namespace

Result<ContinuationQuality> compare_continuation(const Model& model, KvManager& kv, const KvSequence& exact,
                                                 const KvSequence& approx, std::span<const int32_t> continuation,
                                                 ThreadPool& pool, size_t score_from) {
  if (score_from >= continuation.size()) return make_error("compare_continuation: nothing to score");
  if (exact.tokens() != approx.tokens())
    return make_error("compare_continuation: the two contexts hold different tokens");
  const int64_t n_ctx = exact.n_tokens();
  if (n_ctx == 0) return make_error("compare_continuation: empty context");
  // Distribution 0 needs the logits of the context's last token, which a snapshot does not keep: both
  // forks are cut before it and that token runs again with the continuation, in both contexts alike.
  KvSequence a = exact.fork(), b = approx.fork();
  const int64_t keep = a.truncate(n_ctx - 1);
  if (b.truncate(n_ctx - 1) != keep) return make_error("compare_continuation: the contexts' block layouts differ");
  std::vector<int32_t> run(exact.tokens().begin() + keep, exact.tokens().end());
  run.insert(run.end(), continuation.begin(), continuation.end() - 1);
  const int64_t n = int64_t(run.size());
  const int64_t first_scored = n_ctx - 1 - keep;  // index in `run` of the context's last token
  KvSequence* both[] = {&a, &b};
  const std::span<const int32_t> runs[] = {run, run};
  std::vector<float> logits;
  // Every token on the prefill kernels, in both sequences alike. Nothing is committed: the forks are
  // dropped, their written blocks were private copies or new.
  AGENTKV_TRY(prefill_together(model, kv, both, runs, pool, RowOutputs{&logits},
                               PrefillOptions{.commit = false, .rows_from = first_scored}));
  const int n_vocab = model.config().n_vocab;
  const size_t rows = size_t(n - first_scored);
  const size_t m = rows - score_from;
  ContinuationQuality q;
  q.n_positions = int(m);
  int agree = 0;
  for (size_t i = score_from; i < rows; ++i) {
    const float* la = logits.data() + i * size_t(n_vocab);
    const float* lb = logits.data() + (rows + i) * size_t(n_vocab);
    const std::vector<double> pa = log_softmax(la, n_vocab), pb = log_softmax(lb, n_vocab);
    double kl = 0;
    for (int v = 0; v < n_vocab; ++v) kl += std::exp(pa[size_t(v)]) * (pa[size_t(v)] - pb[size_t(v)]);
    q.kl.push_back(std::max(0.0, kl));
    const int ta = argmax(la, n_vocab), tb = argmax(lb, n_vocab);
    if (ta == tb) ++agree;
    else if (q.first_disagreement < 0) q.first_disagreement = int(i - score_from);
    q.nll_exact -= pa[size_t(continuation[i])];
    q.nll_approx -= pb[size_t(continuation[i])];
  }
  std::vector<double> sorted = q.kl;
  std::sort(sorted.begin(), sorted.end());
  for (double k : q.kl) q.mean_kl += k;
  q.mean_kl /= double(m);
  q.max_kl = sorted.back();
  q.p95_kl = sorted[std::min(m - 1, size_t(std::ceil(0.95 * double(m))) - 1)];
  q.top1_agreement = double(agree) / double(m);
  q.nll_exact /= double(m);
  q.nll_approx /= double(m);
  return q;
}

}  // namespace agentkv
