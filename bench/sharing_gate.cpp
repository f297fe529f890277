#include "sharing_gate.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include "bench_agents.h"
#include "util/json.h"

namespace agentkv {

// The cache file holds the measurement only (the verdict is recomputed against today's thresholds).
AGENTKV_JSON_FIELDS(SharingGateResult, agents, kl_mean, kl_p95, top1, greedy)

namespace {

// The gate's workload: small enough to run at start-up in well under a minute on two cores, and
// fixed (bump the version when it changes, so cached measurements are not reused).
constexpr int kGateVersion = 1;
constexpr int kGateAgents = 6;
constexpr int kGateRounds = 2;

std::string cache_path(const std::string& dir, uint64_t fingerprint, double recompute) {
  char name[96];
  std::snprintf(name, sizeof name, "%016llx-r%.4f-v%d.json", static_cast<unsigned long long>(fingerprint), recompute,
                kGateVersion);
  return dir + "/" + name;
}

bool read_cached(const std::string& path, SharingGateResult* r) {
  std::ifstream f(path);
  if (!f) return false;
  std::stringstream ss;
  ss << f.rdbuf();
  auto j = parse_json(ss.str(), 8);
  if (!j.ok()) return false;
  auto cached = json_to<SharingGateResult>(*j, path);
  if (!cached.ok() || cached->agents < 1) return false;
  r->agents = cached->agents;
  r->kl_mean = cached->kl_mean;
  r->kl_p95 = cached->kl_p95;
  r->top1 = cached->top1;
  r->greedy = cached->greedy;
  return true;
}

void write_cached(const std::string& path, const SharingGateResult& r) {
  // A cache that cannot be written only costs a re-measurement next time.
  std::error_code ec;
  // Written whole then renamed, so a concurrent start never reads half a file.
  const std::string tmp = path + ".tmp" + std::to_string(::getpid());
  {
    std::ofstream f(tmp);
    f << dump_json(r) << "\n";
    if (!f) return;
  }
  std::filesystem::rename(tmp, path, ec);
}

}  // namespace

std::string SharingGateResult::summary() const {
  char buf[320];
  std::snprintf(buf, sizeof buf,
                "R=%.3g: KL mean %.4f (max %.3g), greedy agreement %.3f (min %.3g), top-1 %.3f over %d answers%s: %s",
                recompute, kl_mean, thresholds.max_kl_mean, greedy, thresholds.min_greedy_agreement, top1, agents, from_cache ? " (cached)" : "",
                pass ? "pass" : "FAIL, rounds run exactly");
  return buf;
}

std::string default_sharing_gate_cache_dir() {
  if (const char* env = std::getenv("AGENTKV_MODELS"); env && *env) return std::string(env) + "/../sharing-gate";
  const char* home = std::getenv("HOME");
  return std::string(home ? home : ".") + "/.cache/agentkv/sharing-gate";
}

Result<SharingGateResult> run_sharing_gate(const LoadedModel& lm, ThreadPool& pool, double recompute,
                                           const SharingGateThresholds& th, const std::string& cache_dir) {
  if (!(recompute >= 0 && recompute <= 1)) return make_error("recompute must be in [0, 1]");
  SharingGateResult r;
  r.recompute = recompute;
  r.thresholds = th;
  const std::string path = cache_dir.empty() ? "" : cache_path(cache_dir, lm.fingerprint, recompute);
  // Servers starting together (a test suite, a fleet on one host) measure once: the others wait on
  // the lock and read the result. Without a lock file the gate simply measures.
  int lock_fd = -1;
  if (!path.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(cache_dir, ec);
    lock_fd = ::open((path + ".lock").c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0644);
    if (lock_fd >= 0) ::flock(lock_fd, LOCK_EX);
  }
  struct Unlock {
    int fd;
    ~Unlock() {
      if (fd >= 0) ::close(fd);  // closing releases the flock
    }
  } unlock{lock_fd};
  if (!path.empty() && read_cached(path, &r)) {
    r.from_cache = true;
  } else {
    BenchAgentsOptions o;
    o.workload = "generative-agents";
    o.workload_opt.n_agents = kGateAgents;
    o.workload_opt.n_rounds = kGateRounds;
    o.workload_opt.seed = 1;
    o.modes = {"tokendance"};
    o.recompute = {recompute};
    o.quality = true;
    o.progress = false;
    o.kv_mem = int64_t(1) << 30;
    BenchAgentsReport rep;
    AGENTKV_ASSIGN_OR_RETURN(rep, run_bench_agents(lm, pool, o));
    if (rep.modes.empty() || rep.modes[0].overall.quality_agents == 0)
      return make_error("the gate's workload produced no answer to compare");
    const RoundStats& q = rep.modes[0].overall;
    r.agents = q.quality_agents;
    r.kl_mean = q.kl_mean;
    r.kl_p95 = q.kl_p95;
    r.top1 = q.top1_agreement;
    r.greedy = q.greedy_agreement;
    if (!path.empty()) write_cached(path, r);
  }
  r.pass = r.kl_mean <= th.max_kl_mean && r.greedy >= th.min_greedy_agreement;
  return r;
}

}  // namespace agentkv
