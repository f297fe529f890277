#include "share/continuation_quality.h"

#include <algorithm>
#include <cmath>

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

int argmax(const float* logits, int n) { return int(std::max_element(logits, logits + n) - logits); }

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
  // forks are cut before it (down to a block start if the cut falls in a full block) and the cut
  // tokens run again with the continuation, in both contexts alike.
  KvSequence a = exact.fork(), b = approx.fork();
  const int64_t keep = a.truncate(n_ctx - 1);
  if (b.truncate(n_ctx - 1) != keep) return make_error("compare_continuation: the contexts' block layouts differ");
  std::vector<int32_t> run(exact.tokens().begin() + keep, exact.tokens().end());
  run.insert(run.end(), continuation.begin(), continuation.end() - 1);
  const int64_t n = int64_t(run.size());
  if (!a.reserve(n) || !b.reserve(n)) return make_error("compare_continuation: KV budget too small");
  Batch batch;
  batch.seqs.push_back(SeqBlocks{a.blocks().data(), int32_t(a.blocks().size())});
  batch.seqs.push_back(SeqBlocks{b.blocks().data(), int32_t(b.blocks().size())});
  const int64_t first_scored = n_ctx - 1 - keep;  // index in `run` of the context's last token
  for (int s = 0; s < 2; ++s)
    for (int64_t i = 0; i < n; ++i)
      batch.add(run[size_t(i)], int32_t(keep + i), s, int32_t(keep + i), i >= first_scored);
  batch.n_tile_tokens = 0;  // every token on the prefill kernels, in both sequences alike
  const int n_vocab = model.config().n_vocab;
  std::vector<float> logits(batch.logit_rows.size() * size_t(n_vocab));
  AGENTKV_TRY(model.forward(batch, kv.arena(), logits.data(), pool));
  // Nothing is committed: the forks are dropped, their written blocks were private copies or new.
  const size_t rows = batch.logit_rows.size() / 2;
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
