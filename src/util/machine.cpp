// machine_memory_limit and usable_hardware_threads from sysconf, /proc/self/cgroup and
// sched_getaffinity; the budget checks the CLI runs on --kv-mem and -t.
#include "util/machine.h"

#include <sched.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <thread>

#include "util/input_file.h"

namespace agentkv {

namespace {

// A cgroup file holds one short line; 4 KiB bounds the read of anything else found there.
constexpr int64_t kCgroupFileBytes = 4096;

std::optional<int64_t> read_limit_file(const std::string& path) {
  auto text = read_input_file(path, kCgroupFileBytes, "cgroup limit");
  if (!text.ok()) return std::nullopt;
  char* end = nullptr;
  const long long v = std::strtoll(text->c_str(), &end, 10);
  if (end == text->c_str() || v <= 0) return std::nullopt;  // "max" (v2: no limit) or unreadable
  return int64_t(v);
}

// The limit file of `dir` (a cgroup path, "/a/b") and of each ancestor under `root`, the smallest.
void tighten_by_cgroup(const std::string& root, std::string dir, const std::string& file, MemoryLimit* best) {
  for (;;) {
    const std::string path = root + (dir == "/" ? "" : dir) + "/" + file;
    if (auto v = read_limit_file(path); v && *v < best->bytes) *best = MemoryLimit{*v, "cgroup limit " + path};
    if (dir.empty() || dir == "/") return;
    const size_t slash = dir.rfind('/');
    dir = slash == 0 || slash == std::string::npos ? "/" : dir.substr(0, slash);
  }
}

}  // namespace

std::optional<MemoryLimit> machine_memory_limit() {
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page_size = sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || page_size <= 0) return std::nullopt;
  MemoryLimit best{int64_t(pages) * int64_t(page_size), "physical RAM"};
  // Lines read "0::/path" (v2) or "4:memory:/path" (v1's memory controller).
  auto cgroups = read_input_file("/proc/self/cgroup", 1 << 16, "cgroup list");
  if (!cgroups.ok()) return best;
  std::istringstream lines(*cgroups);
  for (std::string line; std::getline(lines, line);) {
    const size_t a = line.find(':'), b = a == std::string::npos ? a : line.find(':', a + 1);
    if (b == std::string::npos) continue;
    const std::string controllers = line.substr(a + 1, b - a - 1), dir = line.substr(b + 1);
    if (line.compare(0, a, "0") == 0 && controllers.empty())
      tighten_by_cgroup("/sys/fs/cgroup", dir, "memory.max", &best);
    else if (controllers == "memory")
      tighten_by_cgroup("/sys/fs/cgroup/memory", dir, "memory.limit_in_bytes", &best);
  }
  return best;
}

int usable_hardware_threads() {
  int n = int(std::thread::hardware_concurrency());
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) {
    const int allowed = CPU_COUNT(&set);
    if (allowed > 0 && (n <= 0 || allowed < n)) n = allowed;
  }
  return n > 0 ? n : 1;
}

std::string format_bytes(int64_t bytes) {
  static const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  double v = double(bytes);
  int u = 0;
  while (v >= 1024 && u < 6) v /= 1024, ++u;
  char buf[48];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.1f %s", v, kUnits[u]);
  return buf;
}

Status check_memory_budget(const std::string& option, int64_t bytes) {
  const auto limit = machine_memory_limit();
  if (!limit || bytes <= limit->bytes) return Status();
  return make_error(ErrorCode::kResourceExhausted,
                    option + " " + format_bytes(bytes) + " (" + std::to_string(bytes) + " bytes) is more than this " +
                        "machine can hold: " + limit->source + " is " + format_bytes(limit->bytes) + " (" +
                        std::to_string(limit->bytes) + " bytes)");
}

Status check_thread_count(const std::string& option, int64_t threads) {
  const int usable = usable_hardware_threads();
  if (threads <= usable) return Status();
  return make_error(option + " " + std::to_string(threads) + " is more than the " + std::to_string(usable) +
                    " hardware threads this process may run on (hardware_concurrency and CPU affinity); give at "
                    "most " + std::to_string(usable) + ", or 0 for all of them");
}

}  // namespace agentkv
