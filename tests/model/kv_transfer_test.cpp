// Cross-model KV transfer on the real models. A map fitted within one model (A → A) must recover
// that model's own cache (the identity is in the ridge's hypothesis space), and decoding from the
// transferred cache must give nearly the logits of native prefill. Maps are refused for another
// pair, when corrupted, and a cache of another model or text is refused. A chat agent's context
// aligns across two chat templates (transfer/chat_alignment.h), and a transfer of what the sender
// holds only in part computes the rest natively; recomputing everything is native prefill, bit for bit.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>

#include "kjv_corpus.h"
#include "model_test_util.h"
#include "kv/direct_prefill.h"
#include "share/turn_pieces.h"
#include "transfer/chat_alignment.h"
#include "transfer/kv_transfer.h"
#include "transfer/layer_kv.h"
#include "transfer/token_alignment.h"
#include "lab/transfer/transfer_fit.h"
#include "lab/transfer/transfer_quality.h"

namespace agentkv::testing {
namespace {

// A map fitted on Exodus chapters [first, last], each cut to ~300 tokens.
Result<TransferMap> fit_on_exodus(const LoadedModel& sender, const LoadedModel& receiver, int first, int last) {
  TransferFitter fit(sender, receiver);
  for (const std::string& ch : kjv_chapters("ex", first, last)) AGENTKV_TRY(fit.add_passage(cut_at_space(ch, 1400), test_pool()));
  return fit.solve();
}

// Fitted once per binary: SmolLM2 → SmolLM2 on Exodus 1-4.
const TransferMap& self_map() {
  static TransferMap map = [] {
    auto m = fit_on_exodus(real_model("smollm2"), real_model("smollm2"), 1, 4);
    EXPECT_TRUE(m.ok()) << m.error();
    return m.ok() ? *m : TransferMap{};
  }();
  return map;
}

std::unique_ptr<KvManager> transfer_manager(const LoadedModel& lm) {
  KvManagerOptions o;
  o.block_size = 16;
  o.mem_bytes = 64ll << 20;
  auto m = KvManager::create(lm.config(), lm.fingerprint, o);
  EXPECT_TRUE(m.ok()) << m.error();
  return std::move(*m);
}

// Evaluation text (John) was never seen in fitting (Exodus): the first ~1000 bytes of John 1 as
// the context, the next ~300 as the continuation it should help predict.
std::string eval_context() { return cut_at_space(kjv_chapters("joh", 1, 1)[0], 1000); }
std::string eval_continuation() {
  const std::string ch = kjv_chapters("joh", 1, 1)[0];
  const size_t start = eval_context().size();
  return cut_at_space(ch.substr(start), 300);
}

// The evaluation context in SmolLM2's cache, and an empty SmolLM2 sequence to transfer it into.
struct SelfTransfer {
  const LoadedModel& a = real_model("smollm2");
  const std::string ctx = eval_context();
  std::unique_ptr<KvManager> skv = transfer_manager(a), rkv = transfer_manager(a);
  KvSequence sender{*skv}, receiver{*rkv};
  SelfTransfer() {
    auto spans = tokenize_with_spans(*a.tokenizer, ctx, a.tokenizer->add_bos_default());
    EXPECT_TRUE(spans.ok());
    if (spans.ok()) {
      EXPECT_TRUE(prefill_sequence(*a.model, *skv, sender, spans->tokens, test_pool()).ok());
    }
  }
  Result<KvTransferReport> run(const TransferMap& map, const KvTransferOptions& opt = {}) {
    return transfer_kv_cache(map, a, *skv, sender, a, *rkv, receiver, ctx, test_pool(), opt);
  }
};

// The worst relative error (over layers, K and V) of the receiver's cache against the sender's own,
// past the native first token; XFER_DEBUG prints every layer's.
double worst_relative_kv_error(const SelfTransfer& t) {
  const ModelConfig& c = t.a.config();
  const auto native = read_unrotated_kv(c, t.skv->arena(), t.sender.blocks(), t.sender.n_tokens());
  const auto moved = read_unrotated_kv(c, t.rkv->arena(), t.receiver.blocks(), t.receiver.n_tokens());
  double worst = 0;
  for (size_t l = 0; l < native.size(); ++l) {
    for (int kv = 0; kv < 2; ++kv) {
      const std::vector<float>& x = kv ? native[l].v : native[l].k;
      const std::vector<float>& y = kv ? moved[l].v : moved[l].k;
      double num = 0, den = 0;
      for (size_t i = size_t(c.kv_dim()); i < x.size(); ++i) {  // past the native first token
        num += double(x[i] - y[i]) * double(x[i] - y[i]);
        den += double(x[i]) * double(x[i]);
      }
      worst = std::max(worst, std::sqrt(num / den));
      if (std::getenv("XFER_DEBUG")) std::printf("layer %zu %c rel err %.3e\n", l, kv ? 'V' : 'K', std::sqrt(num / den));
    }
  }
  return worst;
}

// Writes a fitted map to a file and loads it back for the pair (a, a): what a server would read.
Result<TransferMap> through_file(const TransferMap& map, const LoadedModel& a, const char* name) {
  const std::string path = ::testing::TempDir() + name;
  AGENTKV_TRY(save_transfer_map(map, path));
  auto back = load_transfer_map(path, a, a);
  std::remove(path.c_str());
  return back;
}

TEST(KvTransfer, SelfMapReproducesOwnCache) {
  const TransferMap& map = self_map();
  ASSERT_EQ(map.sender_layer, depth_proportional_layers(30, 30));
  SelfTransfer t;
  KvSequence& sender = t.sender;
  KvSequence& receiver = t.receiver;
  auto rep = t.run(map);
  ASSERT_TRUE(rep.ok()) << rep.error();
  EXPECT_EQ(rep->n_native, 1);
  EXPECT_EQ(receiver.tokens(), sender.tokens());
  EXPECT_TRUE(receiver.approximate());
  const double worst = worst_relative_kv_error(t);
  std::printf("self-map relative cache error (worst layer, K or V): %.2e\n", worst);
  // Measured 1.7e-2 (layer 1 K; most layers 2e-3..8e-3) with the default alpha 1e-4 fitted on
  // ~1k tokens of Exodus and read on John: the identity is reachable, what is left is the ridge
  // shrinking directions the fitting text rarely excites, plus f16 rounding (~5e-4). A wrong RoPE
  // round trip or a misplaced slot gives errors of order 1.
  EXPECT_LT(worst, 3e-2);
}

TEST(KvTransfer, SelfMapLogitsMatchNativePrefill) {
  const LoadedModel& a = real_model("smollm2");
  auto q = measure_transfer_quality(self_map(), a, a, eval_context(), eval_continuation(), test_pool());
  ASSERT_TRUE(q.ok()) << q.error();
  std::printf("self-map: %lld ctx tokens, %lld continuation; NLL native %.4f transfer %.4f no-context %.4f; "
              "mean KL %.2e, top-1 agreement %.3f\n",
              (long long)q->n_context_tokens, (long long)q->n_continuation, q->nll_native, q->nll_transfer,
              q->nll_no_context, q->mean_kl, q->top1_agreement);
  // Measured: mean KL 6.0e-3, top-1 agreement 0.90 (the misses are near-ties), NLL 3.274 vs 3.256
  // native, while the context is worth 0.64 nats/token here. The map amplifies float rounding: the
  // same projection summed in scalar order gave KL 5.3e-3, in double 5.7e-3, on the AVX2 matmul
  // 6.0e-3. The bounds leave ~2x room; a
  // broken transfer (cache zeroed, misplaced or mis-rotated) loses most of the context benefit and
  // fails them by far.
  EXPECT_LT(q->mean_kl, 1e-2);
  EXPECT_GE(q->top1_agreement, 0.85);
  EXPECT_LT(std::fabs(q->nll_transfer - q->nll_native), 0.04);
  EXPECT_GT(q->nll_no_context - q->nll_native, 0.1) << "the context must matter, or the comparison says nothing";
}

// Hybrid mode at its limit: recomputing every context token natively must give native prefill's
// predictions exactly, which pins down the suffix's slots and positions.
TEST(KvTransfer, HybridSuffixRecomputesNatively) {
  const LoadedModel& a = real_model("smollm2");
  KvTransferOptions all;
  all.native_suffix = 1 << 20;
  auto q = measure_transfer_quality(self_map(), a, a, eval_context(), eval_continuation(), test_pool(), all);
  ASSERT_TRUE(q.ok()) << q.error();
  std::printf("hybrid, all native: mean KL %.2e, NLL %.5f vs %.5f\n", q->mean_kl, q->nll_transfer, q->nll_native);
  // Batch-invariant prefill (layer_kv.h): the recomputed cache is bit-identical to native prefill.
  EXPECT_LT(q->mean_kl, 1e-9);
  EXPECT_NEAR(q->nll_transfer, q->nll_native, 1e-9);
}

// The suffix as a share of the context (the server's default is at least 12.5%): share 1 is native
// prefill exactly, and a share recomputes ceil(share × context tokens) of them.
TEST(KvTransfer, HybridSuffixShareOneIsNativePrefill) {
  const LoadedModel& a = real_model("smollm2");
  KvTransferOptions all;
  all.native_suffix_share = 1.0;
  auto q = measure_transfer_quality(self_map(), a, a, eval_context(), eval_continuation(), test_pool(), all);
  ASSERT_TRUE(q.ok()) << q.error();
  EXPECT_LT(q->mean_kl, 1e-9);
  EXPECT_NEAR(q->nll_transfer, q->nll_native, 1e-9);
  KvTransferOptions eighth;
  eighth.native_suffix_share = 0.125;
  KvTransferOptions modes[1] = {eighth};
  auto m = measure_transfer_modes(self_map(), a, a, eval_context(), eval_continuation(), test_pool(), modes);
  ASSERT_TRUE(m.ok()) << m.error();
  const KvTransferReport& rep = (*m)[0].report;
  EXPECT_EQ(rep.n_suffix, int64_t(std::ceil(0.125 * double(rep.n_receiver_tokens))));
  EXPECT_EQ(rep.n_native, 1 + rep.n_suffix);  // BOS and the suffix
  KvTransferOptions bad;
  bad.native_suffix_share = 1.5;
  EXPECT_FALSE(measure_transfer_quality(self_map(), a, a, eval_context(), eval_continuation(), test_pool(), bad).ok());
}

// The hybrid by deviation at share 1: every projected token recomputed through every layer after the
// check pass must again be native prefill exactly (the two passes split at the check layer are
// batch-invariant), which pins down the check pass's positions, slots and hidden-state hand-over.
TEST(KvTransfer, HybridByDeviationAtShareOneIsNativePrefill) {
  const LoadedModel& a = real_model("smollm2");
  KvTransferOptions all;
  all.check_layer = 1;
  all.recompute_ratio = 1.0;
  all.native_suffix = 1;
  auto q = measure_transfer_quality(self_map(), a, a, eval_context(), eval_continuation(), test_pool(), all);
  ASSERT_TRUE(q.ok()) << q.error();
  std::printf("hybrid by deviation, share 1: mean KL %.2e, NLL %.5f vs %.5f\n", q->mean_kl, q->nll_transfer, q->nll_native);
  EXPECT_LT(q->mean_kl, 1e-9);
  EXPECT_NEAR(q->nll_transfer, q->nll_native, 1e-9);
  KvTransferOptions bad = all;
  bad.check_layer = a.config().n_layer;
  EXPECT_FALSE(measure_transfer_quality(self_map(), a, a, eval_context(), eval_continuation(), test_pool(), bad).ok());
}

// The hybrid by rarity (KvTransferOptions::rare_share): the projected tokens with the smallest counts in
// the map's fitting text are recomputed through every layer with their neighbours. At share 1 every
// projected token is (one run, in order, on the batch-invariant prefill kernels): native prefill exactly.
// A share of one token recomputes that token's latest occurrence and the window around it (3 either side);
// without counts, or with a check layer, it is refused.
TEST(KvTransfer, HybridByRarityRecomputesTheRarestTokensAndShareOneIsNativePrefill) {
  const LoadedModel& a = real_model("smollm2");
  std::vector<uint32_t> counts(size_t(a.config().n_vocab), 5);
  KvTransferOptions all;
  all.rare_share = 1.0;
  all.rare_window = 0;
  all.rare_counts = counts;
  auto q = measure_transfer_quality(self_map(), a, a, eval_context(), eval_continuation(), test_pool(), all);
  ASSERT_TRUE(q.ok()) << q.error();
  std::printf("hybrid by rarity, share 1: mean KL %.2e, NLL %.5f vs %.5f\n", q->mean_kl, q->nll_transfer, q->nll_native);
  EXPECT_LT(q->mean_kl, 1e-9);
  EXPECT_NEAR(q->nll_transfer, q->nll_native, 1e-9);

  // One rare token: the receiver's token 40 of the context (BOS is 0), unseen in fitting.
  auto spans = tokenize_with_spans(*a.tokenizer, eval_context(), a.tokenizer->add_bos_default());
  ASSERT_TRUE(spans.ok());
  const std::vector<int32_t>& t = spans->tokens;
  const int64_t nr = int64_t(t.size());
  counts[size_t(t[40])] = 0;
  int64_t latest = 0;
  for (int64_t i = 1; i < nr; ++i)
    if (t[size_t(i)] == t[40]) latest = i;
  KvTransferOptions one;
  one.rare_share = 1.0 / double(nr);  // ceil(share × context tokens) = 1
  one.rare_window = 3;
  one.rare_window_after = 3;
  one.rare_counts = counts;
  KvTransferOptions modes[1] = {one};
  auto m = measure_transfer_modes(self_map(), a, a, eval_context(), eval_continuation(), test_pool(), modes);
  ASSERT_TRUE(m.ok()) << m.error();
  const KvTransferReport& rep = (*m)[0].report;
  ASSERT_GT(latest, 3);
  ASSERT_LT(latest + 3, nr);
  EXPECT_EQ(rep.n_recomputed, 7);  // the token and three on either side
  EXPECT_EQ(rep.n_projected, nr - 1);
  EXPECT_EQ(rep.check_layers, 0);  // the counts choose: no check pass
  EXPECT_NEAR(native_work_share(rep, a.config().n_layer), double(1 + 7) / double(nr), 1e-12);

  KvTransferOptions none = one;
  none.rare_counts = {};
  auto r = measure_transfer_quality(self_map(), a, a, eval_context(), eval_continuation(), test_pool(), none);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().find("count"), std::string::npos) << r.error();
  KvTransferOptions with_dev = one;
  with_dev.check_layer = 1;
  r = measure_transfer_quality(self_map(), a, a, eval_context(), eval_continuation(), test_pool(), with_dev);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().find("rarity"), std::string::npos) << r.error();
}

// A map conditioned on the receiver's first two layers (transfer_map.h): the receiver computes
// those layers itself for every token, bit for bit its native prefill's (the check pass is
// batch-invariant); the later layers are projected from the sender's K/V and that hidden state.
// Fitted SmolLM2 -> SmolLM2 on Exodus 1-4 (the identity is reachable; on two chapters the 961
// features overfit, error 0.2), the deeper layers come out close to native, and the map refuses to
// combine with a recompute ratio.
TEST(KvTransfer, ReceiverConditionedMapComputesItsFirstLayersNatively) {
  const LoadedModel& a = real_model("smollm2");
  TransferFitOptions fo;
  fo.receiver_hidden_layers = 2;
  TransferFitter fit(a, a, fo);
  for (const std::string& ch : kjv_chapters("ex", 1, 4)) ASSERT_TRUE(fit.add_passage(cut_at_space(ch, 1400), test_pool()).ok());
  auto map = fit.solve();
  ASSERT_TRUE(map.ok()) << map.error();
  EXPECT_EQ(map->receiver_hidden_layers, 2);
  EXPECT_EQ(map->in_dim(), 2 * a.config().kv_dim() + 1 + a.config().n_embd);
  auto back = through_file(*map, a, "conditioned_map.gguf");
  ASSERT_TRUE(back.ok()) << back.error();
  EXPECT_EQ(back->receiver_hidden_layers, 2);
  EXPECT_EQ(back->weights, map->weights);

  SelfTransfer t;
  auto rep = t.run(*back);
  ASSERT_TRUE(rep.ok()) << rep.error();
  EXPECT_EQ(rep->check_layers, 2);
  EXPECT_EQ(rep->n_recomputed, 0);
  EXPECT_EQ(rep->n_projected, t.sender.n_tokens() - 1);
  const KvSequence& sender = t.sender;
  const KvSequence& receiver = t.receiver;
  const auto native = read_unrotated_kv(a.config(), t.skv->arena(), sender.blocks(), sender.n_tokens());
  const auto moved = read_unrotated_kv(a.config(), t.rkv->arena(), receiver.blocks(), receiver.n_tokens());
  for (size_t l = 0; l < 2; ++l) {
    EXPECT_EQ(moved[l].k, native[l].k) << "layer " << l;
    EXPECT_EQ(moved[l].v, native[l].v) << "layer " << l;
  }
  double worst = 0;
  for (size_t l = 2; l < native.size(); ++l) {
    double num = 0, den = 0;
    for (size_t i = size_t(a.config().kv_dim()); i < native[l].k.size(); ++i) {
      num += double(native[l].k[i] - moved[l].k[i]) * double(native[l].k[i] - moved[l].k[i]);
      den += double(native[l].k[i]) * double(native[l].k[i]);
    }
    worst = std::max(worst, std::sqrt(num / den));
  }
  std::printf("conditioned self-map: worst relative K error past layer 1: %.3e\n", worst);
  // Measured 3.3e-2 (the unconditioned self-map: 1.7e-2; 961 features instead of 385 on the same
  // ~1k rows overfit a little more). Twice that is the bound; hidden rows misaligned with their
  // tokens, or projected before the check pass, give errors of order 1.
  EXPECT_LT(worst, 6.5e-2);

  KvTransferOptions bad;
  bad.check_layer = 1;
  bad.recompute_ratio = 0.2;
  KvSequence other(*t.rkv);
  auto refused = transfer_kv_cache(*back, a, *t.skv, t.sender, a, *t.rkv, other, t.ctx, test_pool(), bad);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().find("conditioned"), std::string::npos) << refused.error();
}

// A map reading a window of three sender layers per receiver layer (fit-transfer --sender-window 3),
// SmolLM2 -> SmolLM2: the layer itself is in every window, so the identity stays reachable and the
// applied map must reproduce the sender's own cache as the one-layer map does. A window whose layers
// were read in the wrong order or at the wrong offsets, or a bias in the wrong column, gives errors
// of order 1. Round-trips through the file with its window.
TEST(KvTransfer, SenderWindowMapReproducesOwnCache) {
  const LoadedModel& a = real_model("smollm2");
  TransferFitOptions fo;
  fo.sender_window = 3;
  TransferFitter fit(a, a, fo);
  for (const std::string& ch : kjv_chapters("ex", 1, 8)) ASSERT_TRUE(fit.add_passage(cut_at_space(ch, 1400), test_pool()).ok());
  auto map = fit.solve();
  ASSERT_TRUE(map.ok()) << map.error();
  EXPECT_EQ(map->sender_window, 3);
  EXPECT_EQ(map->in_dim(), 3 * 2 * a.config().kv_dim() + 1);
  EXPECT_EQ(map->sender_layer, sender_layer_windows(30, 30, 3));
  auto back = through_file(*map, a, "window_map.gguf");
  ASSERT_TRUE(back.ok()) << back.error();
  EXPECT_EQ(back->sender_window, 3);
  EXPECT_EQ(back->weights, map->weights);

  SelfTransfer t;
  auto rep = t.run(*back);
  ASSERT_TRUE(rep.ok()) << rep.error();
  EXPECT_EQ(rep->n_projected, t.sender.n_tokens() - 1);
  const double worst = worst_relative_kv_error(t);
  std::printf("window-3 self-map relative cache error (worst layer, K or V): %.2e\n", worst);
  // Measured 2.8e-2 on Exodus 1-8 (~2k rows for 1,153 features; the one-layer map: 1.7e-2 from 385
  // features on half the rows): the extra layers are more to shrink and to overfit. Twice that is the bound.
  EXPECT_LT(worst, 5.5e-2);
}

// The share of the context benefit kept by the pure transfer and by the serving default's hybrid.
struct KeptShares {
  double pure = 0, hybrid = 0, rarity = 0;
};

// The server's default hybrid for a map without token counts recomputes the last 15% of the context (at
// least 128 tokens; BENCHMARKS.md "The share the 0.90 target asks for"); the tests below recompute that
// share of their ~250-token context (the 128-token floor would be half of it). With counts (every map
// fit-transfer writes now) the default is by rarity, measured beside it.
constexpr double kDefaultShare = 0.15;

// Fits sender → receiver on Exodus [first, last] and returns the share of the context benefit the
// transferred cache keeps on unseen text (John 1), pure and with the default hybrid, after checking
// that the context matters.
KeptShares kept_across_families(const char* from, const char* to, int first, int last, double alpha) {
  const LoadedModel& a = real_model(from);
  const LoadedModel& b = real_model(to);
  TransferFitOptions fo;
  fo.ridge_alpha = alpha;
  TransferFitter fit(a, b, fo);
  for (const std::string& ch : kjv_chapters("ex", first, last)) {
    const Status st = fit.add_passage(cut_at_space(ch, 1400), test_pool());
    EXPECT_TRUE(st.ok()) << st.error();
  }
  auto map = fit.solve();
  EXPECT_TRUE(map.ok()) << map.error();
  if (!map.ok()) return {};
  EXPECT_EQ(map->sender_layer.front(), 0);
  EXPECT_EQ(map->sender_layer.back(), a.config().n_layer - 1);
  EXPECT_EQ(map->receiver_token_counts.size(), size_t(b.config().n_vocab)) << "the fitter keeps the counts";
  KvTransferOptions modes[3];
  modes[1].native_suffix_share = kDefaultShare;
  // The server's default where the map kept its counts (server/agents_protocol.h): the 2% rarest (at
  // most 24), each with 4 tokens before and 1 after, and the last 10%.
  modes[2].native_suffix_share = 0.10;
  modes[2].rare_share = 0.02;
  modes[2].rare_max_tokens = 24;
  modes[2].rare_counts = map->receiver_token_counts;
  auto m = measure_transfer_modes(*map, a, b, eval_context(), eval_continuation(), test_pool(), modes);
  EXPECT_TRUE(m.ok()) << m.error();
  if (!m.ok()) return {};
  const TransferQuality& q = (*m)[0].quality;
  const TransferQuality& h = (*m)[1].quality;
  const TransferQuality& rr = (*m)[2].quality;
  std::printf("%s->%s (%lld fit rows, alpha %g): NLL native %.4f transfer %.4f last:%g%% %.4f no-context %.4f; kept %.3f, "
              "hybrid %.3f, rarity default %.3f (work %.3f); top-1 agreement %.3f, hybrid %.3f, rarity %.3f\n",
              from, to, (long long)map->n_fit_tokens, alpha, q.nll_native, q.nll_transfer, 100 * kDefaultShare,
              h.nll_transfer, q.nll_no_context, q.kept(), h.kept(), rr.kept(),
              native_work_share((*m)[2].report, b.config().n_layer), q.top1_agreement, h.top1_agreement,
              rr.top1_agreement);
  EXPECT_GT(q.nll_no_context - q.nll_native, 0.1) << "the context must matter, or the comparison says nothing";
  return {q.kept(), h.kept(), rr.kept()};
}

// Cross-family, SmolLM2 → Gemma 3 (different tokenizers, depths, KV widths and RoPE styles, two
// RoPE bases on the receiver), fitted on a small slice of Exodus: the transferred cache must
// carry a real part of the context into Gemma's predictions on unseen text.
TEST(KvTransfer, CrossFamilyKeepsPartOfTheContextBenefit) {
  // Measured: kept 0.56 (NLL 2.24 transferred, 1.86 native, 2.73 without context) from 2.6k fit
  // rows; 0.58 with 14k rows (BENCHMARKS.md). Half the measured share is the bound; a cache that
  // carried nothing of the context would score about 0.
  const KeptShares k = kept_across_families("smollm2", "gemma3", 5, 12, 1e-4);
  EXPECT_GT(k.pure, 0.25);
  // The default hybrid (the last 15%): measured 1.012 here (pure 0.500; a kept above 1 is a short
  // continuation the hybrid predicted better than native prefill); on 10 held-out John passages of ~1k
  // tokens its per-passage kept has a standard error of 0.030 (BENCHMARKS.md). The bound is the
  // measurement less that error, far above the pure transfer's.
  EXPECT_GT(k.hybrid, 0.98);
  // The default where the map kept its counts (by rarity: the 2% rarest, at most 24, ties to runs of
  // equally rare tokens, with 4 tokens before and 1 after each, and the last 10%): measured 0.990 here
  // at 16.8% of native prefill's work; the bound is the measurement less the same per-passage standard
  // error.
  EXPECT_GT(k.rarity, 0.96);
}

// The other direction, Gemma 3 → SmolLM2: SentencePiece sender, byte-level BPE receiver, fewer
// and wider sender layers than receiver layers (several receiver layers read one sender layer).
TEST(KvTransfer, CrossFamilyGemmaToSmolKeepsPartOfTheContextBenefit) {
  // Measured: kept 0.45 (NLL 3.61 transferred, 3.26 native, 3.90 without context) from 658 fit
  // rows, two chapters to keep the test short. This direction has 513 features per regression:
  // with so few rows the default alpha (1e-4) overfits (kept -3.0; 1e-2: -0.19), alpha 0.1 does
  // not. A cache that carried nothing of the context would score about 0.
  const KeptShares k = kept_across_families("gemma3", "smollm2", 5, 6, 0.1);
  EXPECT_GT(k.pure, 0.25);
  // The default hybrid (the last 15%): measured 0.547 here (pure 0.432) with this two-chapter map;
  // per-passage standard error 0.028 on 10 held-out passages (BENCHMARKS.md, a 30-passage map: 0.900).
  // The bound is the measurement less that error; with so small a map the hybrid is only a little above pure.
  EXPECT_GT(k.hybrid, 0.515);
  // The default by rarity: measured 0.524 here at 19.3% of native prefill's work (on held-out Luke and
  // Acts with a whole-KJV map, 0.914 +- 0.018 at 1k tokens: BENCHMARKS.md, "Hybrid by rarity"); the
  // bound is the measurement less that error, above pure transfer's 0.432.
  EXPECT_GT(k.rarity, 0.505);
}

TEST(KvTransfer, RefusesOtherPairCorruptFileAndForeignCache) {
  const LoadedModel& a = real_model("smollm2");
  const LoadedModel& b = real_model("gemma3");
  const TransferMap& map = self_map();
  const std::string path = ::testing::TempDir() + "self_map.gguf";
  ASSERT_TRUE(save_transfer_map(map, path).ok());
  ASSERT_TRUE(load_transfer_map(path, a, a).ok());
  auto other = load_transfer_map(path, a, b);
  ASSERT_FALSE(other.ok());
  EXPECT_NE(other.error().find("refused"), std::string::npos) << other.error();
  other = load_transfer_map(path, b, a);
  EXPECT_FALSE(other.ok());

  std::vector<char> bytes;
  {
    std::ifstream f(path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(f), {});
  }
  bytes[bytes.size() - 100] ^= 0x01;
  {
    std::ofstream f(path, std::ios::binary);
    f.write(bytes.data(), std::streamsize(bytes.size()));
  }
  auto bad = load_transfer_map(path, a, a);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().find("corrupted"), std::string::npos) << bad.error();
  std::remove(path.c_str());

  // A cache of another model (gemma3's manager passed as the sender's), or of other text.
  const std::string ctx = "In the beginning was the Word.";
  auto akv = transfer_manager(a), bkv = transfer_manager(b), rkv = transfer_manager(a);
  auto sa = tokenize_with_spans(*a.tokenizer, ctx, a.tokenizer->add_bos_default());
  auto sb = tokenize_with_spans(*b.tokenizer, ctx, b.tokenizer->add_bos_default());
  ASSERT_TRUE(sa.ok() && sb.ok());
  KvSequence from_b(*bkv), from_a(*akv), out(*rkv);
  ASSERT_TRUE(prefill_sequence(*b.model, *bkv, from_b, sb->tokens, test_pool()).ok());
  auto r = transfer_kv_cache(map, a, *bkv, from_b, a, *rkv, out, ctx, test_pool());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().find("another model"), std::string::npos) << r.error();
  ASSERT_TRUE(prefill_sequence(*a.model, *akv, from_a, sa->tokens, test_pool()).ok());
  r = transfer_kv_cache(map, a, *akv, from_a, a, *rkv, out, "Some other text entirely.", test_pool());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().find("not the sender's tokenization"), std::string::npos) << r.error();
  EXPECT_EQ(out.n_tokens(), 0);
}

// A chat agent's conversation, rendered by ChatML (SmolLM2) and by Gemma's template.
std::vector<ChatMessage> chat() {
  return {{"system", "You are a dispatcher's assistant. Answer in one short sentence."},
          {"user", "Remember this: the courier's name is Tamsin and the parcel goes to Harbour Street 12."},
          {"assistant", "Noted: Tamsin takes the parcel to Harbour Street 12."},
          {"user", "Who takes the parcel?"}};
}

// Every receiver token but BOS gets sender tokens, each side's tokens are its own agent context, and
// Gemma's turn markers pool SmolLM2's: "<start_of_turn>" an "<|im_start|>", "<end_of_turn>" an "<|im_end|>".
TEST(KvTransfer, ChatContextsAlignAcrossTwoTemplates) {
  const LoadedModel& a = real_model("smollm2");
  const LoadedModel& b = real_model("gemma3");
  const std::vector<ChatMessage> msgs = chat();
  auto al = align_chat_contexts(*a.tokenizer, *b.tokenizer, msgs, {});
  ASSERT_TRUE(al.ok()) << al.error();
  auto sender_ctx = agent_context_tokens(*a.tokenizer, msgs, {}, false);
  auto receiver_ctx = agent_context_tokens(*b.tokenizer, msgs, {}, false);
  ASSERT_TRUE(sender_ctx.ok() && receiver_ctx.ok());
  EXPECT_EQ(al->sender.tokens, *sender_ctx);
  EXPECT_EQ(al->receiver.tokens, *receiver_ctx);
  ASSERT_EQ(al->sender.text_bytes, al->receiver.text_bytes);
  for (const TokenSpans* t : {&al->sender, &al->receiver}) {
    EXPECT_EQ(t->end.back(), t->text_bytes);
    for (size_t i = 0; i + 1 < t->size(); ++i) EXPECT_EQ(t->end[i], t->begin[i + 1]) << i;
  }
  const TokenAlignment align = align_tokens(al->receiver, al->sender);
  EXPECT_EQ(align.count[0], 0) << "Gemma's BOS stands for no text";
  auto piece = [](const LoadedModel& lm, int32_t id) { return lm.tokenizer->token_to_piece(id, true); };
  int markers = 0;
  for (size_t r = 1; r < align.size(); ++r) {
    ASSERT_GT(align.count[r], 0) << "receiver token " << r << " '" << piece(b, al->receiver.tokens[r]) << "'";
    const std::string rp = piece(b, al->receiver.tokens[r]);
    if (rp != "<start_of_turn>" && rp != "<end_of_turn>") continue;
    const std::string want = rp == "<start_of_turn>" ? "<|im_start|>" : "<|im_end|>";
    bool found = false;
    for (int32_t k = 0; k < align.count[r]; ++k)
      found = found || piece(a, al->sender.tokens[size_t(align.first[r] + k)]) == want;
    EXPECT_TRUE(found) << rp << " at " << r;
    ++markers;
  }
  EXPECT_EQ(markers, 6) << "three Gemma turns (the system prompt sits in the first user turn)";
}

// Layer il's K and V rows of slots [0, n) of two sequences are the same bits.
bool same_kv(const KvSequence& x, const KvSequence& y, int64_t n) {
  const KvArena& ax = x.manager().arena();
  const KvArena& ay = y.manager().arena();
  const int bs = ax.block_size();
  const size_t row = size_t(ax.kv_dim()) * sizeof(kv_t);
  for (int il = 0; il < ax.n_layer(); ++il)
    for (int64_t t = 0; t < n; ++t) {
      const int32_t bx = x.blocks()[size_t(t / bs)], by = y.blocks()[size_t(t / bs)];
      const int slot = int(t % bs);
      if (std::memcmp(ax.layer(il).k(bx, slot), ay.layer(il).k(by, slot), row) != 0 ||
          std::memcmp(ax.layer(il).v(bx, slot), ay.layer(il).v(by, slot), row) != 0)
        return false;
    }
  return true;
}

// The sender holds its rendering but the last few tokens (a context that ends with a generated
// answer lacks the closing marker): the receiver tokens past what it holds are computed natively,
// the rest projected. With the whole context asked natively the result is the receiver's own
// prefill, bit for bit, and exact (indexable in the prefix cache).
TEST(KvTransfer, AlignedTransferComputesWhatTheSenderLacksAndShareOneIsNativePrefill) {
  const LoadedModel& a = real_model("smollm2");
  const LoadedModel& b = real_model("gemma3");
  auto map = fit_on_exodus(a, b, 1, 2);
  ASSERT_TRUE(map.ok()) << map.error();
  auto al = align_chat_contexts(*a.tokenizer, *b.tokenizer, chat(), {});
  ASSERT_TRUE(al.ok()) << al.error();
  const size_t held = al->sender.size() - 4;
  TokenSpans part = al->sender;
  part.tokens.resize(held);
  part.begin.resize(held);
  part.end.resize(held);
  auto akv = transfer_manager(a), bkv = transfer_manager(b);
  KvSequence from(*akv);
  ASSERT_TRUE(prefill_sequence(*a.model, *akv, from, part.tokens, test_pool()).ok());
  const int64_t nr = int64_t(al->receiver.size());
  int64_t unheld = 0;
  while (al->receiver.end[size_t(nr - 1 - unheld)] > part.end.back()) ++unheld;
  ASSERT_GT(unheld, 0);

  KvSequence got(*bkv);
  auto rep = transfer_aligned_kv_cache(*map, a, *akv, from, part, b, *bkv, got, al->receiver, test_pool());
  ASSERT_TRUE(rep.ok()) << rep.error();
  EXPECT_EQ(rep->n_suffix, unheld);
  EXPECT_EQ(rep->n_native, 1 + unheld);
  EXPECT_EQ(rep->n_projected, nr - 1 - unheld);
  EXPECT_EQ(got.tokens(), al->receiver.tokens);
  EXPECT_TRUE(got.approximate());

  KvTransferOptions all;
  all.native_suffix = 1 << 20;
  KvSequence full(*bkv), native(*bkv);
  rep = transfer_aligned_kv_cache(*map, a, *akv, from, part, b, *bkv, full, al->receiver, test_pool(), all);
  ASSERT_TRUE(rep.ok()) << rep.error();
  EXPECT_EQ(rep->n_projected, 0);
  EXPECT_FALSE(full.approximate());
  ASSERT_TRUE(prefill_sequence(*b.model, *bkv, native, al->receiver.tokens, test_pool()).ok());
  EXPECT_TRUE(same_kv(full, native, nr));
  EXPECT_FALSE(same_kv(got, native, nr)) << "the projected cache is not the native one";
}

}  // namespace
}  // namespace agentkv::testing
