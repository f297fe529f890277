// The start-up quality gate on the served round path (engine/sharing_gate.h).
#include "engine/sharing_gate.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <optional>
#include <fstream>

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include "engine/collective_round.h"
#include "engine/round_quality.h"
#include "share/turn_pieces.h"
#include "util/fnv_hash.h"
#include "util/input_file.h"
#include "util/json.h"

namespace agentkv {

// The cache file holds the measurement only (the verdict is recomputed against today's thresholds).
AGENTKV_JSON_FIELDS(SharingGateResult, agents, kl_mean, kl_p95, top1, greedy)

namespace {

// The gate's workload: small enough to run at start-up in about a minute on two cores, and fixed
// (bump the version when it or the measured path changes, so cached measurements are not reused).
// A few villagers hear an opening message; every later round's block is all of their answers, as
// /v1/rounds shares them by default.
// Version 3: the exact baseline re-runs only the context's last token (KvSequence::truncate keeps a
// block cut inside), so the blended context is compared as it is served.
constexpr int kGateVersion = 3;
// Read in attention (EngineOptions::resume_in_attention), version 4: with a lossy diff format a turn
// reads its own round's run losslessly, the format applied when the turn ends.
constexpr int kInAttentionGateVersion = 4;
constexpr int kGateRounds = 3;
constexpr int kGateTokens = 32;     // answer length, and the greedy agreement's horizon
constexpr int kGateMinTokens = 8;   // so that every answer has tokens to compare
struct GateAgent {
  const char* name;
  const char* persona;
};
constexpr GateAgent kGateAgents[] = {
    {"Ada", "You are Ada, a cheerful baker in the village of Elm Hollow. You have lived here for 12 years and "
            "you know everyone. Speak in the first person."},
    {"Bram", "You are Bram, a grumpy blacksmith in the village of Elm Hollow. You have lived here for 30 years and "
             "you distrust new ideas. Speak in the first person."},
    {"Cleo", "You are Cleo, a curious teacher in the village of Elm Hollow. You arrived two years ago and you ask "
             "many questions. Speak in the first person."},
    {"Dov", "You are Dov, a careful farmer in the village of Elm Hollow. Your fields lie by the river. Speak in "
            "the first person."},
};
constexpr const char* kGateOpening =
    "Town crier: The river flooded the lower fields last night and the old bridge is closed.\n"
    "Mayor: We meet in the square at noon to decide what to do.";
constexpr const char* kGateInstruction = "What do you say to the others? Answer in two sentences.";

// The workload through the collective-round job on an engine of its own (the server's engine
// options: block size 16, prefix caching on), every agent resuming from its resident context.
Result<GateMeasurement> measure_gate(const LoadedModel& lm, ThreadPool& pool, double recompute, const GatePath& path) {
  std::unique_ptr<Engine> engine;
  AGENTKV_ASSIGN_OR_RETURN(engine, make_gate_engine(lm, pool, path));
  const Tokenizer& tok = *lm.tokenizer;
  const size_t n = std::size(kGateAgents);
  std::vector<std::vector<ChatMessage>> messages(n);
  std::vector<std::vector<std::string>> segments(n);
  std::vector<uint64_t> context(n, 0);
  std::vector<std::string> answers(n);
  for (size_t i = 0; i < n; ++i) messages[i].push_back(ChatMessage{"system", kGateAgents[i].persona});
  GateMeasurement m;
  for (int r = 0; r < kGateRounds; ++r) {
    std::string shared;
    if (r == 0) {
      shared = kGateOpening;
    } else {
      for (size_t i = 0; i < n; ++i) shared += std::string(kGateAgents[i].name) + ": " + answers[i] + "\n";
      shared.pop_back();
    }
    std::vector<RoundTurn> turns(n);
    for (size_t i = 0; i < n; ++i) {
      messages[i].push_back(ChatMessage{"user", shared + "\n\n" + kGateInstruction});
      segments[i].push_back(shared);
      AgentContextTokens c;
      AGENTKV_ASSIGN_OR_RETURN(c, agent_context_pieces(tok, messages[i], segments[i], true));
      // As the server marks it: this round's block, when every earlier one was found too.
      if (!c.segments.empty() && c.segments.size() == segments[i].size()) turns[i].segment = c.segments.back();
      turns[i].params.prompt = std::move(c.tokens);
      turns[i].params.max_tokens = kGateTokens;
      turns[i].params.min_tokens = kGateMinTokens;
      turns[i].params.kv_from = context[i];
    }
    CollectiveRoundOptions ro;
    ro.recompute = recompute;
    ro.keep_blended = true;
    std::optional<CollectiveRoundResult> got;
    start_collective_round(*engine, turns, ro, [&got](CollectiveRoundResult&& res) { got = std::move(res); });
    AGENTKV_TRY(engine->run_until_idle());
    if (!got) return make_error("the gate's round job did not finish");
    if (!got->status.ok()) return got->status.status_error();
    auto q = measure_round_quality(*engine, turns, *got, kGateTokens,
                                   diff_format_lossless(path.format) ? ApproxContext::kBlended : ApproxContext::kStored);
    for (const RoundTurnOutcome& o : got->turns) {
      engine->release_retained(o.blended);
      engine->release_retained(o.prefix);
    }
    for (const auto& [mh, start] : got->masters) engine->release_retained(mh);
    if (!q.ok()) return q.status_error();
    for (size_t i = 0; i < n; ++i) {
      const RoundTurnOutcome& o = got->turns[i];
      context[i] = o.answer.retained_kv;
      answers[i] = o.answer.text;
      messages[i].push_back(ChatMessage{"assistant", o.answer.text});
    }
    add_gate_measurement(m, *q);
  }
  return m;
}

std::string cache_path(const std::string& dir, const std::string& kind, int version, uint64_t fingerprint,
                       double recompute) {
  char name[128];
  std::snprintf(name, sizeof name, "%s%016llx-r%.4f-v%d.json", kind.c_str(), static_cast<unsigned long long>(fingerprint),
                recompute, version);
  return dir + "/" + name;
}

// The cached measurement carries a checksum of its values and of the file's name (which holds the
// model fingerprint, R and the gate's version), so an edited or damaged cache, or one copied under
// another model's name, is measured again instead of deciding the gate.
uint64_t cache_checksum(const std::string& path, const Json& values) {
  Fnv1a h;
  const std::string name = std::filesystem::path(path).filename().string();
  const std::string text = dump_json(values);
  h.mix(name.data(), name.size());
  h.mix(text.data(), text.size());
  return h.value();
}

bool read_cached(const std::string& path, SharingGateResult* r) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return false;
  auto text = read_input_file(path, 1 << 16, "the sharing gate's cache");
  if (!text.ok()) return false;
  auto j = parse_json(*text, 8);
  if (!j.ok() || !j->is_object() || !j->contains("checksum") || !(*j)["checksum"].is_string()) return false;
  const std::string sum = (*j)["checksum"].get<std::string>();
  j->erase("checksum");
  char want[24];
  std::snprintf(want, sizeof want, "%016llx", static_cast<unsigned long long>(cache_checksum(path, *j)));
  if (sum != want) {
    std::fprintf(stderr, "agentkv: %s fails its checksum; measuring the sharing gate again\n", path.c_str());
    return false;
  }
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
  Json j = Json(r);
  char sum[24];
  std::snprintf(sum, sizeof sum, "%016llx", static_cast<unsigned long long>(cache_checksum(path, j)));
  j["checksum"] = sum;
  // Written whole then renamed, so a concurrent start never reads half a file.
  const std::string tmp = path + ".tmp" + std::to_string(::getpid());
  {
    std::ofstream f(tmp);
    f << dump_json(j) << "\n";
    if (!f) return;
  }
  std::filesystem::rename(tmp, path, ec);
}

}  // namespace

std::string SharingGateResult::summary() const {
  char path_text[80] = "";
  if (path.echo_keep) std::snprintf(path_text, sizeof path_text, ", echoes keeping %.3g", *path.echo_keep);
  if (path.master_context != MasterContext::kBlock)
    std::snprintf(path_text + std::strlen(path_text), sizeof path_text - std::strlen(path_text),
                  ", masters in an agent's context");
  char buf[360];
  std::snprintf(buf, sizeof buf,
                "R=%.3g%s%s%s: KL mean %.4f (max %.3g), greedy agreement %.3f (min %.3g), top-1 %.3f over %d answers%s: %s",
                recompute, diff_format_lossless(path.format) ? "" : ", diffs ",
                diff_format_lossless(path.format) ? "" : std::string(diff_format_name(path.format)).c_str(),
                (std::string(path.in_attention ? ", read in attention" : "") + path_text).c_str(), kl_mean, thresholds.max_kl_mean, greedy, thresholds.min_greedy_agreement, top1, agents, from_cache ? " (cached)" : "",
                pass ? "pass" : "FAIL, this path runs exactly");
  return buf;
}

std::string default_sharing_gate_cache_dir() {
  if (const char* env = std::getenv("AGENTKV_MODELS"); env && *env) return std::string(env) + "/../sharing-gate";
  const char* home = std::getenv("HOME");
  return std::string(home ? home : ".") + "/.cache/agentkv/sharing-gate";
}

Result<std::unique_ptr<Engine>> make_gate_engine(const LoadedModel& lm, ThreadPool& pool, const GatePath& path) {
  EngineOptions eo;
  eo.kv.block_size = 16;
  eo.kv.mem_bytes = int64_t(1) << 30;
  eo.diff_format = path.format;
  eo.resume_in_attention = path.in_attention;
  eo.echo_keep = path.echo_keep;
  eo.master_context = path.master_context;
  return Engine::create(lm, eo, pool);
}


void add_gate_measurement(GateMeasurement& m, const std::vector<TurnQuality>& turns) {
  for (const TurnQuality& t : turns) {
    if (!t.measured) continue;
    ++m.agents;
    m.kls.insert(m.kls.end(), t.quality.kl.begin(), t.quality.kl.end());
    m.top1 += t.quality.top1_agreement * t.quality.n_positions;
    m.positions += t.quality.n_positions;
    m.greedy += t.greedy_agreement;
  }
}

Result<SharingGateResult> run_sharing_gate(const LoadedModel& lm, ThreadPool& pool, double recompute,
                                           const SharingGateThresholds& th, const std::string& cache_dir,
                                           const GatePath& path) {
  const GateMeasureFn measure = [path](const LoadedModel& m, ThreadPool& p, double r, DiffFormat f) {
    GatePath measured = path;
    measured.format = f;
    return measure_gate(m, p, r, measured);
  };
  std::string kind = path.in_attention ? "attn-" : "";
  if (path.echo_keep) {
    char e[32];
    std::snprintf(e, sizeof e, "echo%.4f-", *path.echo_keep);
    kind += e;
  }
  // Version 2 of an agent's context as the master: the member the prefix cache holds most of (the first
  // before), and [BOS][block] where it would crowd the budget.
  if (path.master_context != MasterContext::kBlock)
    kind += std::string("master-") + master_context_name(path.master_context) + "-v2-";
  auto g = run_gate_cached(lm, pool, recompute, th, cache_dir, kind,
                           path.in_attention ? kInAttentionGateVersion : kGateVersion, measure, path.format);
  if (g.ok()) g->path = path;
  return g;
}

Result<SharingGateResult> run_gate_cached(const LoadedModel& lm, ThreadPool& pool, double recompute,
                                          const SharingGateThresholds& th, const std::string& cache_dir,
                                          const std::string& kind, int version, const GateMeasureFn& measure,
                                          DiffFormat format) {
  if (!(recompute >= 0 && recompute <= 1)) return make_error("recompute must be in [0, 1]");
  SharingGateResult r;
  r.recompute = recompute;
  r.thresholds = th;
  r.path.format = format;
  // The lossless format keeps the cache names measured before there were others.
  const std::string fkind = diff_format_lossless(format) ? kind : kind + std::string(diff_format_name(format)) + "-";
  const std::string path = cache_dir.empty() ? "" : cache_path(cache_dir, fkind, version, lm.fingerprint, recompute);
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
    GateMeasurement m;
    AGENTKV_ASSIGN_OR_RETURN(m, measure(lm, pool, recompute, format));
    if (m.agents == 0 || m.kls.empty()) return make_error("the gate's workload produced no shared answer to compare");
    r.agents = m.agents;
    for (double k : m.kls) r.kl_mean += k;
    r.kl_mean /= double(m.kls.size());
    std::sort(m.kls.begin(), m.kls.end());
    r.kl_p95 = m.kls[std::min(m.kls.size() - 1, size_t(0.95 * double(m.kls.size())))];
    r.top1 = m.top1 / double(std::max<int64_t>(1, m.positions));
    r.greedy = m.greedy / m.agents;
    if (!path.empty()) write_cached(path, r);
  }
  r.pass = r.kl_mean <= th.max_kl_mean && r.greedy >= th.min_greedy_agreement;
  return r;
}

}  // namespace agentkv
