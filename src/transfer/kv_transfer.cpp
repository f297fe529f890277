#include "transfer/kv_transfer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>
#include <utility>
#include <vector>

#include "kv/direct_prefill.h"
#include "share/selective_recompute.h"
#include "transfer/layer_kv.h"
#include "transfer/paired_features.h"
#include "transfer/token_alignment.h"

namespace agentkv {

namespace {
using Clock = std::chrono::steady_clock;
double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// How far either side rare_runs looks for equally rare neighbours when it breaks a tie.
constexpr int64_t kRareNeighbourhood = 2;

// What both entry points refuse before any work: another pair, caches of other models, a receiver
// sequence in use, an impossible option.
Status check_sides(const TransferMap& map, const LoadedModel& sender, const KvManager& sender_kv,
                   const LoadedModel& receiver, const KvManager& receiver_kv, const KvSequence& receiver_seq,
                   const KvTransferOptions& opt) {
  AGENTKV_TRY(check_transfer_pair(map, sender, receiver));
  if (sender_kv.pool().fingerprint() != sender.fingerprint)
    return make_error("kv transfer: the sender cache was made by another model than " + sender.name);
  if (receiver_kv.pool().fingerprint() != receiver.fingerprint)
    return make_error("kv transfer: the receiver cache manager belongs to another model than " + receiver.name);
  if (receiver_seq.n_tokens() != 0) return make_error("kv transfer: the receiver sequence must be empty");
  if (!(opt.native_suffix_share >= 0.0 && opt.native_suffix_share <= 1.0))
    return make_error("kv transfer: native_suffix_share must be a share in [0, 1]");
  if (opt.last_logits && opt.native_suffix < 1 && opt.native_suffix_share <= 0.0)
    return make_error("kv transfer: last_logits needs a native suffix of at least one token (the context's last token is run natively)");
  if (opt.check_layer >= receiver.config().n_layer)
    return make_error("kv transfer: check layer " + std::to_string(opt.check_layer) + " outside the receiver's " +
                      std::to_string(receiver.config().n_layer) + " layers");
  if (!(opt.recompute_ratio >= 0.0 && opt.recompute_ratio <= 1.0))
    return make_error("kv transfer: recompute ratio " + std::to_string(opt.recompute_ratio) + " outside [0, 1]");
  if (map.receiver_hidden_layers > 0 && opt.recompute_ratio > 0)
    return make_error("kv transfer: a map conditioned on the receiver's first layers projects after they run; a "
                      "recompute ratio (chosen by the projection's deviation at a check layer) does not combine with it");
  if (opt.recompute_ratio > 0 && opt.check_layer < 0)
    return make_error("kv transfer: a recompute ratio needs a check layer (the layer whose deviation chooses)");
  if (!(opt.rare_share >= 0.0 && opt.rare_share <= 1.0))
    return make_error("kv transfer: rare_share must be a share in [0, 1]");
  if (opt.rare_share > 0 && opt.rare_counts.size() != size_t(receiver.config().n_vocab))
    return make_error("kv transfer: a share recomputed by rarity needs the fitting text's count of each of the receiver's " +
                      std::to_string(receiver.config().n_vocab) + " tokens (have " +
                      std::to_string(opt.rare_counts.size()) + ")");
  if (opt.rare_max_tokens < 0) return make_error("kv transfer: rare_max_tokens must not be negative");
  if (opt.rare_window < 0 || opt.rare_window_after < -1)
    return make_error("kv transfer: rare_window must not be negative");
  if (opt.rare_share > 0 && (map.receiver_hidden_layers > 0 || opt.check_layer >= 0))
    return make_error("kv transfer: a share recomputed by rarity does not combine with a check layer (dev:R) or a map "
                      "conditioned on the receiver's first layers");
  return {};
}
}  // namespace

int64_t rare_budget(double share, int64_t max_tokens, int64_t n) {
  const int64_t k = share > 0 ? int64_t(std::ceil(share * double(n) - 1e-9)) : 0;
  return max_tokens > 0 ? std::min(k, max_tokens) : k;
}

std::vector<std::pair<int64_t, int64_t>> rare_runs(std::span<const int32_t> tokens, std::span<const uint32_t> counts,
                                                   int64_t want, int before, int after) {
  std::vector<int64_t> idx(tokens.size());
  std::iota(idx.begin(), idx.end(), 0);
  const size_t k = size_t(std::clamp<int64_t>(want, 0, int64_t(idx.size())));
  const int64_t n = int64_t(tokens.size());
  auto count = [&](int64_t i) { return counts[size_t(tokens[size_t(i)])]; };
  // Among tokens seen equally often, those with more neighbours at least as rare go first: a run of
  // tokens the fitting text never had (a number, an identifier, a name in pieces) is a specific the
  // map cannot carry, and neighbours' windows overlap, so the run costs fewer recomputed tokens than as
  // many scattered ones. Measured (BENCHMARKS.md): on 18 passkey probes of held-out Luke + Acts that the
  // later-token tie lost 8 of at 24 tokens, this recalls all 18 with less work.
  std::vector<int> rare_neighbours(tokens.size(), 0);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = std::max<int64_t>(0, i - kRareNeighbourhood); j <= std::min(n - 1, i + kRareNeighbourhood); ++j)
      if (j != i && count(j) <= count(i)) ++rare_neighbours[size_t(i)];
  std::partial_sort(idx.begin(), idx.begin() + ptrdiff_t(k), idx.end(), [&](int64_t a, int64_t b) {
    const uint32_t ca = count(a), cb = count(b);
    if (ca != cb) return ca < cb;
    const int na = rare_neighbours[size_t(a)], nb = rare_neighbours[size_t(b)];
    return na != nb ? na > nb : a > b;
  });
  idx.resize(k);
  std::sort(idx.begin(), idx.end());
  std::vector<std::pair<int64_t, int64_t>> runs;
  for (int64_t i : idx) {
    const int64_t b = std::max<int64_t>(0, i - before), e = std::min<int64_t>(n, i + after + 1);
    if (!runs.empty() && b <= runs.back().second)
      runs.back().second = std::max(runs.back().second, e);
    else
      runs.emplace_back(b, e);
  }
  return runs;
}

double native_work_share(const KvTransferReport& rep, int n_layer) {
  if (rep.n_receiver_tokens == 0 || n_layer == 0) return 0;
  const double unrecomputed = double(rep.n_projected - rep.n_recomputed);
  const double work = double(rep.n_native + rep.n_recomputed) * n_layer + unrecomputed * rep.check_layers;
  return work / (double(rep.n_receiver_tokens) * n_layer);
}

Result<KvTransferReport> transfer_kv_cache(const TransferMap& map, const LoadedModel& sender, const KvManager& sender_kv,
                                           const KvSequence& sender_seq, const LoadedModel& receiver,
                                           KvManager& receiver_kv, KvSequence& receiver_seq, std::string_view text,
                                           ThreadPool& pool, const KvTransferOptions& opt) {
  AGENTKV_TRY(check_sides(map, sender, sender_kv, receiver, receiver_kv, receiver_seq, opt));
  const auto t_start = Clock::now();
  TokenSpans s, r;
  AGENTKV_ASSIGN_OR_RETURN(s, tokenize_with_spans(*sender.tokenizer, text, sender.tokenizer->add_bos_default()));
  AGENTKV_ASSIGN_OR_RETURN(r, tokenize_with_spans(*receiver.tokenizer, text, receiver.tokenizer->add_bos_default()));
  if (sender_seq.tokens() != s.tokens)
    return make_error("kv transfer: the sender cache holds " + std::to_string(sender_seq.n_tokens()) +
                      " tokens that are not the sender's tokenization of the text (" + std::to_string(s.size()) + " tokens)");
  const double tokenize_s = seconds(Clock::now() - t_start);
  auto rep = transfer_aligned_kv_cache(map, sender, sender_kv, sender_seq, s, receiver, receiver_kv, receiver_seq, r,
                                       pool, opt);
  if (rep.ok()) rep->align_s += tokenize_s;
  return rep;
}

Result<KvTransferReport> transfer_aligned_kv_cache(const TransferMap& map, const LoadedModel& sender,
                                                   const KvManager& sender_kv, const KvSequence& sender_seq,
                                                   const TokenSpans& s, const LoadedModel& receiver,
                                                   KvManager& receiver_kv, KvSequence& receiver_seq,
                                                   const TokenSpans& r, ThreadPool& pool,
                                                   const KvTransferOptions& opt) {
  AGENTKV_TRY(check_sides(map, sender, sender_kv, receiver, receiver_kv, receiver_seq, opt));
  if (sender_seq.tokens() != s.tokens)
    return make_error("kv transfer: the sender cache holds " + std::to_string(sender_seq.n_tokens()) +
                      " tokens, not the " + std::to_string(s.size()) + " aligned ones");
  if (s.text_bytes != r.text_bytes) return make_error("kv transfer: the two sides are not aligned on one text");
  const auto t_start = Clock::now();
  const TokenAlignment align = align_tokens(r, s);
  const SpanWeights weights = span_weights(align, r, s, map.pooling);
  const auto t_align = Clock::now();
  const int64_t nr = int64_t(r.size());
  // Receiver tokens without sender text (empty spans) cannot be projected: compute them natively,
  // as the prefix (BOS only sits at the front).
  int64_t n_native = std::min<int64_t>(nr, std::max(0, opt.native_prefix));
  while (n_native < nr && align.count[size_t(n_native)] == 0) ++n_native;
  // Receiver tokens reaching past the last byte the sender holds have no complete sender run: the
  // receiver computes them, from the first such token on.
  const size_t held = s.size() ? s.end.back() : 0;
  int64_t first_unheld = nr;
  while (first_unheld > n_native && r.end[size_t(first_unheld - 1)] > held) --first_unheld;
  // Tokens the hybrid suffix recomputes are not projected at all.
  const int64_t by_share = int64_t(std::ceil(opt.native_suffix_share * double(nr)));
  const int64_t n_suffix = std::max<int64_t>(
      std::min<int64_t>(nr - n_native, std::max<int64_t>(std::max(0, opt.native_suffix), by_share)), nr - first_unheld);
  const int64_t n_proj = nr - n_native - n_suffix;
  for (int64_t t = n_native; t < n_native + n_proj; ++t)
    if (align.count[size_t(t)] == 0) return make_error("kv transfer: receiver token without aligned sender text");

  if (!receiver_seq.reserve(nr))
    return make_error(ErrorCode::kResourceExhausted,
                      "kv transfer: receiver KV budget too small for " + std::to_string(nr) + " tokens");
  const std::vector<int32_t>& table = receiver_seq.blocks();
  const ModelConfig& sc = sender.config();
  const ModelConfig& rc = receiver.config();
  // Layer by layer, each step spread over the pool: read the mapped sender layer un-rotated (once
  // while consecutive receiver layers share it), pool it per receiver token (with the receiver's own
  // hidden state after its first layers, for a map conditioned on them), project all tokens in one
  // tiled matmul, rotate to receiver positions and store.
  const int in_dim = map.in_dim(), out_dim = map.out_dim();
  const int sender_in = in_dim - map.receiver_hidden_dim;
  constexpr int64_t kGrain = 32;
  // The sender layers of the current window, read once while consecutive receiver layers share them.
  SenderWindow window(sc, sender_kv.arena(), sender_seq.blocks(), sender_seq.n_tokens(), map.sender_window);
  const std::span<const int32_t> rt(r.tokens);
  // A hybrid by rarity: runs of the projected range that the receiver computes itself (below), so
  // they are not projected: nothing reads a projected K/V there before the run overwrites it (a
  // token attends to itself and what precedes it, and the runs go in order).
  std::vector<std::pair<int64_t, int64_t>> rare;
  if (opt.rare_share > 0 && n_proj > 0)
    rare = rare_runs(rt.subspan(size_t(n_native), size_t(n_proj)), opt.rare_counts,
                     rare_budget(opt.rare_share, opt.rare_max_tokens, nr), opt.rare_window,
                     opt.rare_window_after < 0 ? opt.rare_window : opt.rare_window_after);
  // The receiver token of each projected row, in order.
  std::vector<int64_t> row_token;
  row_token.reserve(size_t(n_proj));
  for (int64_t t = 0, k = 0; t < n_proj; ++t) {
    while (k < int64_t(rare.size()) && rare[size_t(k)].second <= t) ++k;
    if (k == int64_t(rare.size()) || t < rare[size_t(k)].first) row_token.push_back(n_native + t);
  }
  const int64_t n_rows = int64_t(row_token.size());
  std::vector<float> x(size_t(n_rows * in_dim)), y(size_t(n_rows * out_dim));
  double project_s = 0;
  LayerRopeTables receiver_ropes(rc, RopeTable::Direction::kApply, nr);
  // Layers [l_begin, n_layer); hidden: the projected tokens' hidden states, rows n_embd apart (a
  // conditioned map has no rarity runs: every projected token is a row).
  auto project_layers = [&](int l_begin, const float* hidden) {
    const auto t0 = Clock::now();
    const int hd = map.receiver_hidden_dim;
    AGENTKV_CHECK(!hidden || n_rows == n_proj);
    if (hidden)
      pool.parallel_for(n_rows, kGrain, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) receiver_hidden_features(hidden + i * hd, hd, x.data() + i * in_dim + sender_in);
      });
    for (int l = l_begin; n_rows > 0 && l < rc.n_layer; ++l) {
      window.load(map.sender_layer[size_t(l)], pool);
      window.features(align, weights, row_token, x.data(), in_dim, pool);
      map.project_rows(l, x.data(), n_rows, y.data(), pool);
      const RopeTable& rope = receiver_ropes.layer(l);
      pool.parallel_for(n_rows, kGrain, [&](int64_t b, int64_t e) {
        // Rows of consecutive tokens in one call.
        for (int64_t i = b, j; i < e; i = j) {
          for (j = i + 1; j < e && row_token[size_t(j)] == row_token[size_t(j - 1)] + 1;) ++j;
          write_rotated_rows(rc, receiver_kv.arena(), table, l, row_token[size_t(i)], row_token[size_t(i)] + (j - i),
                             y.data() + i * out_dim, out_dim, &rope);
        }
      });
    }
    project_s += seconds(Clock::now() - t0);
  };
  // A map conditioned on the receiver's first layers projects the later ones once those have run.
  const int conditioned = map.receiver_hidden_layers;
  if (conditioned == 0) project_layers(0, nullptr);
  // The receiver's own tokens, prefix and suffix, in one pass over its weights (after the projected
  // ones are in place: the suffix attends to them), with the context's last token's logits if asked.
  // A hybrid by deviation (or a conditioned map) runs the prefix alone first (the check pass attends
  // to it), then the projected tokens and the suffix through the selective recompute.
  const bool by_deviation = (opt.check_layer >= 0 || conditioned > 0) && n_proj > 0;
  std::vector<PrefillRun> own{{&receiver_seq, rt.first(size_t(n_native)), 0, n_native}};
  // A hybrid by rarity: its runs of the projected range are run here, in order between the prefix
  // and the suffix (each token attends to everything before it, the runs' own new K/V included).
  int64_t n_rare = 0;
  for (const auto& [b, e] : rare) {
    own.push_back({&receiver_seq, rt.subspan(size_t(n_native + b), size_t(e - b)), n_native + b, e - b});
    n_rare += e - b;
  }
  own.push_back({&receiver_seq, rt.last(size_t(n_suffix)), nr - n_suffix, opt.last_logits ? -1 : n_suffix});
  // A short pass (BOS and the last token: plain transfer) is weight-bound and runs on the decode
  // kernels; a longer one stays on the batch-invariant prefill kernels, so that a hybrid's
  // recomputed tokens are exactly native prefill's.
  const int64_t n_own = by_deviation ? n_native : n_native + n_rare + n_suffix;
  // A hybrid by deviation's recomputed tokens attend to the prefix: it too comes from the prefill
  // kernels, or share 1 would not be native prefill exactly.
  const int64_t kernels = n_own < 4 && !by_deviation ? -1 : 0;
  std::vector<float> last_logits;
  if (n_own > 0)
    AGENTKV_TRY(write_runs(*receiver.model, std::span(own).first(by_deviation ? 1 : own.size()), pool,
                           RowOutputs{opt.last_logits && !by_deviation ? &last_logits : nullptr}, kernels, kPrefillChunk));
  int64_t n_recomputed = n_rare;
  int check_layers = 0;
  if (by_deviation) {
    RecomputeOptions ro;
    ro.ratio = opt.recompute_ratio;
    ro.n_first = 0;
    ro.n_last = int(n_suffix);
    ro.check_layer = conditioned > 0 ? conditioned - 1 : opt.check_layer;
    check_layers = ro.check_layer + 1;
    const AgentSegment seg{SeqBlocks{table.data(), int32_t(table.size())}, int32_t(n_native), int32_t(n_native)};
    RecomputeHooks hooks;
    if (opt.last_logits) {
      last_logits.resize(size_t(rc.n_vocab));
      hooks.last_logits = last_logits.data();
    }
    if (conditioned > 0)
      hooks.after_check = [&](const float* hidden) -> Status {
        project_layers(conditioned, hidden);  // rows [0, n_proj) of the segment are the projected tokens
        return {};
      };
    auto rec = recompute_deviating_tokens(*receiver.model, receiver_kv.arena(), rt.subspan(size_t(n_native)),
                                          std::span(&seg, 1), ro, hooks, pool);
    if (!rec.ok()) return make_error(rec.error());
    n_recomputed = int64_t((*rec)[0].recomputed_slots.size()) - n_suffix;
  }
  if (opt.last_logits) std::copy(last_logits.begin(), last_logits.end(), opt.last_logits);
  // Nothing projected (the suffix covers the context): the receiver's own prefill, exact.
  if (n_proj > 0) receiver_seq.mark_approximate_from(n_native);
  receiver_seq.commit(r.tokens);

  KvTransferReport rep;
  rep.n_sender_tokens = int64_t(s.size());
  rep.n_receiver_tokens = nr;
  rep.n_native = n_native + n_suffix;
  rep.n_suffix = n_suffix;
  rep.n_projected = nr - n_native - n_suffix;
  rep.n_recomputed = n_recomputed;
  rep.check_layers = check_layers;
  rep.align_s = seconds(t_align - t_start);
  rep.project_s = project_s;
  rep.native_s = seconds(Clock::now() - t_align) - project_s;
  return rep;
}

}  // namespace agentkv
