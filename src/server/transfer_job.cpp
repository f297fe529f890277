// The two chained jobs of a context transfer (server/transfer_job.h).
#include "server/transfer_job.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>

#include "kv/direct_prefill.h"
#include "server/mailbox.h"

namespace agentkv {

namespace {

using Clock = std::chrono::steady_clock;

// The sender's K/V, copied out of its engine by job 1 for job 2. The sequence goes before its manager.
struct SenderCopy {
  std::unique_ptr<KvManager> kv;
  std::optional<KvSequence> seq;
};

// The first n tokens of t (and their spans): what the sender holds of its side of the axis.
TokenSpans first_tokens(const TokenSpans& t, size_t n) {
  TokenSpans out;
  out.tokens.assign(t.tokens.begin(), t.tokens.begin() + ptrdiff_t(n));
  out.begin.assign(t.begin.begin(), t.begin.begin() + ptrdiff_t(n));
  out.end.assign(t.end.begin(), t.end.begin() + ptrdiff_t(n));
  out.text_bytes = t.text_bytes;
  return out;
}

// Job 1, on the sender's engine: the held prefix of the sender's tokens, copied into a private manager.
Result<std::shared_ptr<SenderCopy>> copy_sender_context(Engine& e, uint64_t handle, const TokenSpans& want) {
  // A fork gives a dense sequence also of a compact (master–diff) context; dropping it gives its
  // blocks back.
  const uint64_t fork = e.fork_retained(handle);
  if (fork == 0)
    return make_error(ErrorCode::kResourceExhausted, "the agent's context could not be read (gone, or no KV to rebuild it)");
  std::shared_ptr<const KvSequence> seq = e.take_retained(fork);
  if (!seq) return make_error(ErrorCode::kInternal, "the fork of the agent's context is not dense");
  const std::vector<int32_t>& have = seq->tokens();
  size_t held = 0;
  while (held < std::min(have.size(), want.size()) && have[held] == want.tokens[held]) ++held;
  auto copy = std::make_shared<SenderCopy>();
  AGENTKV_ASSIGN_OR_RETURN(copy->kv, private_kv_manager(e.model(), std::max<int64_t>(1, int64_t(held)), e.kv().block_size()));
  auto out = seq->copy_prefix_to(*copy->kv, int64_t(held));
  if (!out.ok()) return out.status_error();
  copy->seq.emplace(std::move(out).value());
  return copy;
}

// Job 2, on the receiver's engine: the transfer into its KV, adopted as a retained context.
Result<TransferredContext> transfer_into(Engine& e, const ContextTransfer& t, const LoadedModel& sender,
                                         const SenderCopy& from, Clock::time_point t_start) {
  const TokenSpans& r = t.aligned.receiver;
  const int64_t n = int64_t(r.size());
  KvSequence seq(e.kv());
  AGENTKV_TRY(e.check_admission(KvDemand{seq.blocks_needed(n), 0, n}, "the transferred context"));
  KvTransferOptions opt;
  opt.native_suffix = int(std::min<int64_t>(t.native_last, n));
  opt.native_suffix_share = t.native_share;
  opt.rare_share = t.rare_share;
  opt.rare_max_tokens = t.rare_max_tokens;
  opt.rare_counts = t.map->map.receiver_token_counts;
  if (t.recompute > 0) {
    opt.check_layer = std::min(kTransferCheckLayer, e.model().config().n_layer - 1);
    opt.recompute_ratio = t.recompute;
  }
  const KvSequence& sender_seq = *from.seq;
  const TokenSpans held = first_tokens(t.aligned.sender, size_t(sender_seq.n_tokens()));
  TransferredContext out;
  AGENTKV_ASSIGN_OR_RETURN(out.report, transfer_aligned_kv_cache(t.map->map, sender, *from.kv, sender_seq, held, e.model(),
                                                                 e.kv(), seq, r, e.pool(), opt));
  const EngineMetrics m = e.metrics();
  if (m.tokens_prefilled > 0)
    out.native_prefill_seconds_estimate = m.prefill_seconds / double(m.tokens_prefilled) * double(n);
  e.note_transfer(uint64_t(out.report.n_projected), uint64_t(out.report.n_native), out.report.native_s);
  out.kept = KeptContext{e.adopt_retained(std::move(seq)), n, 0};
  out.sender_tokens = sender_seq.n_tokens();
  out.seconds = std::chrono::duration<double>(Clock::now() - t_start).count();
  return out;
}

}  // namespace

std::optional<Result<TransferredContext>> transfer_context(ServerState& s, ContextTransfer t, HttpResponseWriter& w) {
  auto box = std::make_shared<Mailbox<Result<TransferredContext>>>();
  auto cancelled = std::make_shared<std::atomic<bool>>(false);
  auto job = std::make_shared<const ContextTransfer>(std::move(t));
  EngineLoop* loop = s.loop.get();
  const size_t receiver = job->map->receiver;
  const LoadedModel* sender_lm = s.models[job->map->sender].lm.get();
  const bool posted = loop->post(
      [box, cancelled, job, loop, receiver, sender_lm](Engine& se) {
        const auto t_start = Clock::now();
        auto copied = copy_sender_context(se, job->sender_kv, job->aligned.sender);
        if (!copied.ok()) return box->put(copied.status_error());
        const bool next = loop->post(
            [box, cancelled, job, sender_lm, t_start, copy = std::move(copied).value()](Engine& re) {
              if (*cancelled) return box->put(Error{ErrorCode::kCancelled, "the transfer was cancelled"});
              box->put(transfer_into(re, *job, *sender_lm, *copy, t_start));
            },
            receiver);
        if (!next) box->put(Error{ErrorCode::kUnavailable, "the server is shutting down"});
      },
      job->map->sender);
  if (!posted) return Result<TransferredContext>(Error{ErrorCode::kUnavailable, "the server is shutting down"});
  return box->result(w, [cancelled] { *cancelled = true; },
                     [loop, receiver](Result<TransferredContext>& r) {
                       if (r.ok()) release_context(*loop, receiver, r->kept.handle);
                     });
}

}  // namespace agentkv
