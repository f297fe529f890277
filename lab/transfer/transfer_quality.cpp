#include "lab/transfer/transfer_quality.h"

#include <chrono>

#include "kv/direct_prefill.h"
#include "share/continuation_quality.h"
#include "transfer/token_alignment.h"

namespace agentkv {

Result<std::vector<TransferModeResult>> measure_transfer_modes(const TransferMap& map, const LoadedModel& sender,
                                                               const LoadedModel& receiver, std::string_view context,
                                                               std::string_view continuation, ThreadPool& pool,
                                                               std::span<const KvTransferOptions> modes) {
  TokenSpans s, r;
  AGENTKV_ASSIGN_OR_RETURN(s, tokenize_with_spans(*sender.tokenizer, context, sender.tokenizer->add_bos_default()));
  AGENTKV_ASSIGN_OR_RETURN(r, tokenize_with_spans(*receiver.tokenizer, context, receiver.tokenizer->add_bos_default()));
  const std::vector<int32_t> cont = receiver.tokenizer->encode(continuation, false, false);
  if (cont.empty()) return make_error("transfer quality: empty continuation");
  std::unique_ptr<KvManager> skv, rkv;
  // Room for the contexts, the continuation and the forks compare_continuation makes (one mode's
  // transferred context at a time).
  AGENTKV_ASSIGN_OR_RETURN(skv, private_kv_manager(sender, 6 * int64_t(s.size()) + 64, 16));
  AGENTKV_ASSIGN_OR_RETURN(rkv, private_kv_manager(receiver, 6 * int64_t(r.size() + cont.size()) + 64, 1));

  KvSequence sender_seq(*skv);
  AGENTKV_TRY(prefill_sequence(*sender.model, *skv, sender_seq, s.tokens, pool));
  KvSequence native(*rkv), empty(*rkv);
  using Clock = std::chrono::steady_clock;
  const auto t0 = Clock::now();
  AGENTKV_TRY(prefill_sequence(*receiver.model, *rkv, native, r.tokens, pool));
  const double native_s = std::chrono::duration<double>(Clock::now() - t0).count();
  const int32_t start = receiver.tokenizer->bos_id();
  AGENTKV_TRY(prefill_sequence(*receiver.model, *rkv, empty, std::span<const int32_t>(&start, 1), pool));
  auto cc = compare_continuation(*receiver.model, *rkv, empty, empty, cont, pool);
  if (!cc.ok()) return make_error(cc.error());

  std::vector<TransferModeResult> out;
  for (const KvTransferOptions& opt : modes) {
    KvSequence transferred(*rkv);
    const auto t1 = Clock::now();
    auto rep = transfer_kv_cache(map, sender, *skv, sender_seq, receiver, *rkv, transferred, context, pool, opt);
    if (!rep.ok()) return make_error(rep.error());
    const double transfer_s = std::chrono::duration<double>(Clock::now() - t1).count();
    auto ab = compare_continuation(*receiver.model, *rkv, native, transferred, cont, pool);
    if (!ab.ok()) return make_error(ab.error());
    TransferModeResult m;
    TransferQuality& q = m.quality;
    q.n_context_tokens = int64_t(r.size());
    q.n_continuation = int64_t(cont.size());
    q.nll_native = ab->nll_exact;
    q.nll_transfer = ab->nll_approx;
    q.nll_no_context = cc->nll_exact;
    q.mean_kl = ab->mean_kl;
    q.top1_agreement = ab->top1_agreement;
    q.native_prefill_s = native_s;
    q.transfer_s = transfer_s;
    m.report = *rep;
    out.push_back(std::move(m));
  }
  return out;
}

Result<TransferQuality> measure_transfer_quality(const TransferMap& map, const LoadedModel& sender,
                                                 const LoadedModel& receiver, std::string_view context,
                                                 std::string_view continuation, ThreadPool& pool,
                                                 const KvTransferOptions& opt) {
  auto m = measure_transfer_modes(map, sender, receiver, context, continuation, pool, std::span(&opt, 1));
  if (!m.ok()) return make_error(m.error());
  return m->front().quality;
}

}  // namespace agentkv
