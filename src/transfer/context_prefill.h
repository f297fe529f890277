// A sequence's K/V written outside the scheduler, for the transfer commands (kv-save,
// transfer-generate) and their evaluation harnesses: a private KV manager, a native prefill
// appended to a sequence, and a greedy continuation from a context. The serving engine schedules
// its own prefills; these exist for one sequence owned by the caller.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>

#include "kv/kv_manager.h"
#include "model/loaded_model.h"
#include "util/status.h"
#include "util/thread_pool.h"

namespace agentkv {

// A KV manager of its own (no prefix caching) with room for n_slots token slots.
Result<std::unique_ptr<KvManager>> private_kv_manager(const LoadedModel& lm, int64_t n_slots, int block_size);

// Runs `tokens` natively after what seq already holds (its own prefill): how a serving engine
// holds the sender's cache, and the native baseline.
Status prefill_sequence(const LoadedModel& lm, const KvManager& kv, KvSequence& seq, std::span<const int32_t> tokens,
                        ThreadPool& pool);

// Greedy continuation of `prompt` after what ctx holds (ctx itself is left as it is): up to n_new
// tokens, decoded to text; stops early once `done` (if given) says the text so far settles it.
Result<std::string> greedy_continuation(const LoadedModel& lm, const KvSequence& ctx, std::span<const int32_t> prompt,
                                        int n_new, ThreadPool& pool,
                                        const std::function<bool(const std::string&)>& done = nullptr);

}  // namespace agentkv
