// A greedy continuation from a context outside the scheduler, for transfer-generate and the transfer
// evaluation harnesses: how a receiver answers from a transferred (or native) cache. Its prefill and
// decode steps are kv/direct_prefill's; the serving engine schedules its own.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>

#include "kv/kv_manager.h"
#include "model/loaded_model.h"
#include "util/status.h"
#include "util/thread_pool.h"

namespace agentkv {

// Greedy continuation of `prompt` after what ctx holds (ctx itself is left as it is): up to n_new
// tokens, decoded to text; stops early once `done` (if given) says the text so far settles it.
Result<std::string> greedy_continuation(const LoadedModel& lm, const KvSequence& ctx, std::span<const int32_t> prompt,
                                        int n_new, ThreadPool& pool,
                                        const std::function<bool(const std::string&)>& done = nullptr);

}  // namespace agentkv
