// The start-up quality gate for collective KV sharing (issue 5, item 6; issue 13). Approximate reuse
// of a shared block (re-rotation plus selective recompute of a share R of its tokens) costs quality
// that depends on the model; LMCache-style reuse with no per-model check is a known way to serve
// wrong answers. Before `serve` lets a model share KV in rounds, it runs the path the server serves
// on a small fixed workload: the collective-round job (engine/collective_round.h) over chat-templated
// agents that resume from their resident contexts, for several all-gather rounds whose later blocks
// are the agents' own answers, at the configured R. Every shared answer is compared with the exact
// context (engine/round_quality.h): the mean KL of the next-token distributions and the greedy
// agreement of the first tokens must meet the committed thresholds below, or the model runs its
// rounds exactly.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/round_quality.h"
#include "kv/kv_diff_codec.h"

#include "model/loaded_model.h"
#include "util/status.h"
#include "util/thread_pool.h"

namespace agentkv {

struct SharingGateThresholds {
  double max_kl_mean;           // nats, KL(exact || shared) averaged over the answers' tokens and agents
  double min_greedy_agreement;  // leading greedy tokens equal to the exact context's, / 32, mean
};

// Committed thresholds: the quality loss we accept for sharing. On the gate's workload at the
// default R = 0.15 (2026-11-30, BENCHMARKS.md) SmolLM2 measured mean KL 0.022 and greedy agreement
// 0.35, Gemma 3 KL 0.005 and 0.49; the bounds leave room for kernel rounding on other machines and
// fail a model whose shared answers drift much further (KL above 0.05 nats per token, or fewer than
// a quarter of the first 32 greedy tokens matching before the first difference, on average).
inline constexpr SharingGateThresholds kSharingGateThresholds{0.05, 0.25};

// The rounds' sharing path a gate measures, beside R (the EngineOptions of the same names); each
// choice is measured and cached apart.
//   format: how resident contexts store their diff rows; each round's blocks are in every later
//     round's context, so a lossy format's error is read back and compounds, and with a lossy format
//     each turn's stored context (restored) is what is compared.
//   in_attention: the agents resume their contexts inside attention (EngineOptions::resume_in_attention).
//   echo_keep: the contexts store echoes (EngineOptions::echo_keep): each round's block quotes every
//     agent's last answer, so from the second round on a context holds one.
//   master_context: where each round computes its block's master (EngineOptions::master_context).
struct GatePath {
  DiffFormat format = DiffFormat::kF16;
  bool in_attention = false;
  std::optional<double> echo_keep;
  MasterContext master_context = MasterContext::kBlock;
};

struct SharingGateResult {
  bool pass = false;
  double recompute = 0;
  SharingGateThresholds thresholds{};
  int agents = 0;               // answers compared (all rounds)
  double kl_mean = 0, kl_p95 = 0, top1 = 0, greedy = 0;
  GatePath path;                // the path measured (the chat gate: its diff format only)
  bool from_cache = false;      // measured at an earlier start (same model fingerprint and R)
  std::string summary() const;  // one line: the measurement, the thresholds and the verdict
};

// Measures the rounds' sharing `path` (or reads the measurement cached under cache_dir for this model
// fingerprint, R, path and the workload's version; empty: no cache) and judges it against `th`.
Result<SharingGateResult> run_sharing_gate(const LoadedModel& lm, ThreadPool& pool, double recompute,
                                           const SharingGateThresholds& th, const std::string& cache_dir,
                                           const GatePath& path = {});

// One gate's raw measurement over its shared answers (summed; run_gate_cached averages).
struct GateMeasurement {
  int agents = 0;               // answers measured
  std::vector<double> kls;      // per scored position
  double top1 = 0;              // top-1 agreement × positions, summed
  int64_t positions = 0;
  double greedy = 0;            // greedy agreement, summed over answers
};
// The gates' own engine, with the server's engine options (block size 16, prefix caching on) and the
// path's.
Result<std::unique_ptr<Engine>> make_gate_engine(const LoadedModel& lm, ThreadPool& pool, const GatePath& path);

// Adds the measured turns of one round (or one chat request) to m.
void add_gate_measurement(GateMeasurement& m, const std::vector<TurnQuality>& turns);
using GateMeasureFn =
    std::function<Result<GateMeasurement>(const LoadedModel&, ThreadPool&, double recompute, DiffFormat format)>;
// The gates' one runner: the measurement cached under cache_dir by `kind`, diff format, model
// fingerprint, R and the workload's `version` (a lock makes servers starting together measure once),
// judged by `th`.
Result<SharingGateResult> run_gate_cached(const LoadedModel& lm, ThreadPool& pool, double recompute,
                                          const SharingGateThresholds& th, const std::string& cache_dir,
                                          const std::string& kind, int version, const GateMeasureFn& measure,
                                          DiffFormat format = DiffFormat::kF16);

// ~/.cache/agentkv/sharing-gate (beside the model cache; $AGENTKV_MODELS/../sharing-gate when set).
std::string default_sharing_gate_cache_dir();

}  // namespace agentkv
