// Time to first token for a context the receiver has not seen: its own prefill of the context vs a
// transfer from the sender's cache of the same text. The sender's cache is assumed to exist already
// (another agent computed it), so it is built before either clock starts. Both clocks stop when
// the first generated token (greedy) is known: native = tokenize + prefill + argmax; transfer =
// tokenize both sides + align + read/pool/project/write + the receiver's own prefix and last
// token(s) + argmax.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "model/loaded_model.h"
#include "transfer/kv_transfer.h"
#include "transfer/transfer_map.h"
#include "util/thread_pool.h"

namespace agentkv {

struct TtftSample {
  int64_t n_receiver_tokens = 0, n_sender_tokens = 0;
  double native_s = 0, transfer_s = 0;
  KvTransferReport transfer;      // its parts' times
  bool same_first_token = false;  // greedy first token of both paths agrees
};

// One sample per repeat; the sender's cache is built once. opt.native_suffix is raised to 1 if
// lower: the context's last token is run by the receiver, which yields the first token's logits.
// Repeats alternate which path runs first, so that a slow phase of a shared machine does not
// always hit the same side.
Result<std::vector<TtftSample>> measure_ttft(const TransferMap& map, const LoadedModel& sender,
                                             const LoadedModel& receiver, std::string_view context, ThreadPool& pool,
                                             KvTransferOptions opt, int repeats);

}  // namespace agentkv
