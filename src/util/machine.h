// What this machine (and this process's share of it) can give: memory and hardware threads. Budgets
// an operator sets (--kv-mem, -t) are checked against these at start, so a budget the machine cannot
// hold is refused with both sizes named instead of starting and ending in the OOM killer or a
// hundredfold oversubscribed thread pool.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "util/status.h"

namespace agentkv {

struct MemoryLimit {
  int64_t bytes = 0;
  std::string source;  // "physical RAM", "cgroup memory.max (/sys/fs/cgroup/...)"
};

// The smallest of physical RAM (sysconf) and every cgroup memory limit over this process (v2
// memory.max, v1 memory.limit_in_bytes, the process's cgroup and its ancestors); nullopt when not
// even the RAM size is known.
std::optional<MemoryLimit> machine_memory_limit();

// Hardware threads this process may run on: std::thread::hardware_concurrency, narrowed by the CPU
// affinity mask (sched_getaffinity: taskset, cpusets). At least 1.
int usable_hardware_threads();

// --kv-mem against machine_memory_limit(): refused (naming both sizes) when larger.
Status check_memory_budget(const std::string& option, int64_t bytes);
// -t against usable_hardware_threads(): refused (naming both) when larger; 0 means "all" and passes.
Status check_thread_count(const std::string& option, int64_t threads);

// 1536 MiB -> "1.5 GiB": sizes in error messages.
std::string format_bytes(int64_t bytes);

}  // namespace agentkv
