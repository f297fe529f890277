// How much of a context's benefit a transferred cache keeps: the receiver's NLL of a held-out
// continuation (teacher forced) after (a) its own prefill of the context, (b) the cache transferred
// from the sender's prefill, (c) no context (BOS only). kept = (c - b) / (c - a).
#pragma once

#include <cstdint>
#include <span>
#include <vector>
#include <string_view>

#include "model/loaded_model.h"
#include "kv/direct_prefill.h"
#include "transfer/kv_transfer.h"
#include "transfer/transfer_map.h"
#include "util/thread_pool.h"

namespace agentkv {

struct TransferQuality {
  int64_t n_context_tokens = 0;  // receiver tokens
  int64_t n_continuation = 0;
  double nll_native = 0, nll_transfer = 0, nll_no_context = 0;  // mean per continuation token, nats
  double mean_kl = 0;          // KL(native || transferred) of the next-token distributions
  double top1_agreement = 0;   // share of positions whose argmax agrees between (a) and (b)
  // Wall time to build the receiver's context cache: its own prefill vs the transfer from the
  // sender's existing cache (informational, for benchmarks; never asserted).
  double native_prefill_s = 0, transfer_s = 0;
  double kept() const { return (nll_no_context - nll_transfer) / (nll_no_context - nll_native); }
};

// Several transfer modes of one context against one native prefill (the modes' own figures; the
// TransferQuality fields other than theirs are shared).
struct TransferModeResult {
  TransferQuality quality;
  KvTransferReport report;
};
Result<std::vector<TransferModeResult>> measure_transfer_modes(const TransferMap& map, const LoadedModel& sender,
                                                               const LoadedModel& receiver, std::string_view context,
                                                               std::string_view continuation, ThreadPool& pool,
                                                               std::span<const KvTransferOptions> modes);

// Sender and receiver each get a private KV manager. Both contexts compute only the context's last
// receiver token natively again to get the first continuation distribution (compare_continuation);
// block size 1 keeps that to exactly one token.
Result<TransferQuality> measure_transfer_quality(const TransferMap& map, const LoadedModel& sender,
                                                 const LoadedModel& receiver, std::string_view context,
                                                 std::string_view continuation, ThreadPool& pool,
                                                 const KvTransferOptions& opt = {});

}  // namespace agentkv
