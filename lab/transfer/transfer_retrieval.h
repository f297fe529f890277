// A retrieval task for transferred caches: the context is a run of verses, each line its reference
// and text ("Acts1:3 To whom also he shewed ..."); a probe repeats one reference and the verse's
// first word after the context ("\nActs1:3 To") and the receiver must continue, greedily, with the
// verse's next words (" whom also he shewed"). Run after (a) its own
// prefill of the context, (b) the transferred cache, (c) no context, (d) hybrids that recompute the
// context's last K tokens, or other hybrids (lab/transfer/hybrid_modes.h). Text only from the evaluation corpus (Debian's bible-kjv).
// The same machinery runs a passkey (needle-in-context) task: a random number planted in filler
// text, asked for after it ("\nWhat is the pass key? The pass key is"); a probe with `number` set
// is a hit when the continuation's first number (after leading spaces) is exactly `expected`.
#pragma once

#include <functional>
#include <span>
#include <string>
#include <vector>

#include "kv/kv_manager.h"
#include "model/loaded_model.h"
#include "transfer/context_prefill.h"
#include "transfer/kv_transfer.h"
#include "transfer/transfer_map.h"
#include "util/thread_pool.h"

namespace agentkv {

struct RetrievalProbe {
  std::string prompt;    // appended to the context: "\n" + the verse's reference + its first word
  std::string expected;  // the continuation must start with this: the verse's next words
  // Passkey probes: after leading whitespace the continuation's run of digits must equal
  // `expected` (a key of digits); "48213." is a hit, "482130" and "4821" are not.
  bool number = false;
};

struct RetrievalHits {
  int n_probes = 0;
  int native = 0, transferred = 0, no_context = 0;
  std::vector<int> hybrid;                 // per hybrid mode
  std::vector<KvTransferReport> reports;   // per hybrid mode: what it projected and recomputed
  KvTransferReport transferred_report;     // the pure transfer's (with a conditioned map, not BOS alone)
  int64_t n_context_tokens = 0;  // receiver tokens
};

// One context, all its probes in every mode. hybrids: the transfer options of (d), e.g. a native
// suffix or a hybrid by deviation (lab/transfer/hybrid_modes.h).
Result<RetrievalHits> measure_retrieval(const TransferMap& map, const LoadedModel& sender, const LoadedModel& receiver,
                                        const std::string& context, const std::vector<RetrievalProbe>& probes,
                                        std::span<const KvTransferOptions> hybrids, ThreadPool& pool);

}  // namespace agentkv
