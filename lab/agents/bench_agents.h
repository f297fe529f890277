// bench-agents: runs a multi-agent workload round by round on the engine, in one or more KV modes,
// and measures what each mode costs: prefill computed vs reused, prefill time, round latency, TTFT,
// KV bytes per agent, cache hit rate, and how many agents a KV budget holds without preemption.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <optional>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "kv/kv_diff_codec.h"
#include "model/loaded_model.h"
#include "util/json.h"
#include "util/status.h"
#include "util/thread_pool.h"
#include "workload.h"

namespace agentkv {

struct BenchAgentsOptions {
  std::string workload = "generative-agents";
  WorkloadOptions workload_opt;
  std::vector<std::string> modes{"prefix"};   // "nocache", "prefix", "tokendance"
  // tokendance: selective-recompute ratios, one run per ratio (reported as td@R), and whether to
  // measure quality against the exact context (untimed extra work).
  std::vector<double> recompute{0.15};
  // tokendance: how each agent's diff rows are stored (EngineOptions::diff_format), one run per format
  // and ratio (reported as td@R, td@R/int8, ...); quality is measured on the stored context.
  std::vector<DiffFormat> diff_formats{DiffFormat::kF16};
  // tokendance: turns read their compact contexts inside attention (EngineOptions::resume_in_attention)
  // instead of from a dense copy restored first.
  bool resume_in_attention = false;
  // tokendance: echoes (EngineOptions::echo_keep), one run per entry (nullopt: off; reported as
  // td@R/echo@K).
  std::vector<std::optional<double>> echo_keeps{std::nullopt};
  // tokendance: where each round's block master is computed (EngineOptions::master_context; reported as
  // td@R/.../master@agent when in an agent's context).
  MasterContext master_context = MasterContext::kBlock;
  // tokendance: also time the same reuse agent by agent (each agent's copy and prefix are kept through
  // the round for it, as they are for quality). Off where only the budget is under test (find-fit).
  bool per_agent_timing = true;
  bool quality = true;
  // A seeded random sample of this many agents (0, or at least the workload's agents: every agent) is
  // what the expensive measurements run on, for towns too large to measure whole: tokendance's quality
  // against the exact context, and the whole of the other modes (nocache, prefix), which run only the
  // sampled agents' turns and take the others' messages from the first tokendance run (run first), so
  // every digest still quotes the whole town. Per-agent figures of a sampled mode are the sample's.
  int sample = 0;
  // Also find, per mode, how many agents fit the budget by running them (find_agents_that_fit).
  bool find_fit = false;
  // Per mode ("prefix", "tokendance", …): find_fit's search starts at this many agents (stepping by an
  // eighth up or down, then bisecting) instead of doubling from the smallest. A mode not named doubles.
  std::map<std::string, int> fit_from;
  int64_t kv_mem = 0;                        // 0: default share of RAM
  int block_size = 16;
  int max_batch_tokens = 512;
  bool progress = true;
};

struct RoundStats {
  int round = 0;
  int agents = 0;                 // turns in the round
  int64_t prompt_tokens = 0;
  int64_t prefill_computed = 0;   // prompt tokens run through the model
  int64_t prefill_reused = 0;     // prompt tokens whose KV came from the prefix cache
  int64_t generated_tokens = 0;
  double prefill_seconds = 0;     // forward time attributed to prefill tokens
  double round_seconds = 0;       // wall time from submitting the round to its last token
  double ttft_p50 = 0, ttft_p99 = 0;
  double kv_bytes_per_agent_resident = 0;  // all agents' final contexts resident at once, shared blocks once
  double kv_bytes_per_agent_peak = 0;      // peak blocks in use during the round / agents
  double hit_rate = 0;            // prefill_reused / prompt_tokens
  int64_t preemptions = 0;
  // prefix mode: agents whose prompt reused fewer tokens than the whole blocks it shares with the
  // agent's previous prompt: the prefix cache evicted part of its history since the last round.
  int64_t evicted_agents = 0;
  int64_t max_agents_fit = 0;     // agents like these whose contexts fit the budget at once
  // tokendance only.
  int64_t segment_tokens = 0;     // the shared segment, per agent
  int64_t segment_recomputed = 0; // segment tokens recomputed, all agents
  double collector_seconds = 0;   // the collective step (re-rotation + selective recompute of all agents)
  double collector_per_agent_seconds = 0;  // the same reuse done agent by agent
  int waves = 0;                  // the collective round ran in this many waves (> 1: the budget split it)
  std::string master_context;     // "block" or "agent": where the round's masters were computed (empty: none)
  double diff_bytes_per_agent = 0;        // an agent's diff rows in their format (records, not blocks)
  double diff_block_bytes_per_agent = 0;  // the blocks those rows take
  // Tokens of an agent's own earlier text its context stores as echoes (EngineOptions::echo_keep) from
  // this round on: a round's; the whole run's, summed.
  double echo_tokens_per_agent = 0;
  // The floor sharing cannot go below: an agent's private tokens (its context less every token of a
  // block it shared, TokendanceAgentOut::private_tokens) at the dense row size, per agent.
  double floor_bytes_per_agent = 0;
  double kv_over_floor = 0;  // kv_bytes_per_agent_resident / floor_bytes_per_agent (overall: the worst round)
  int quality_agents = 0;         // answers scored against the exact context
  double kl_mean = 0, kl_p95 = 0; // KL(exact || tokendance) of the next-token distribution over answers, nats
  double top1_agreement = 0;      // teacher-forced argmax agreement over answers
  double greedy_agreement = 0;    // leading tokens of the answer equal to the exact context's greedy answer
  double ppl_exact = 0, ppl_approx = 0;  // perplexity of the answers under each context
  std::vector<std::string> replies;
};

// One run of the fit search: the agent count and how its rounds went.
struct FitTrial {
  int agents = 0;
  bool fits = false;
  int64_t preemptions = 0;
  int waves = 0;        // the most waves a tokendance round ran in (> 1: its turns did not fit at once)
  std::string refused;  // the budget refused a request or a round (the engine's message)
  // The share of the last round's prompt tokens the prefix cache (or a retained context) supplied: a
  // prefix-mode trial that evicted agents' histories between rounds shows it here, not as a preemption.
  double last_round_hit_rate = 0;
  int64_t evicted_agents = 0;  // summed over the rounds (RoundStats::evicted_agents)
};

struct ModeReport {
  std::string mode;
  MasterContext master_context = MasterContext::kBlock;  // tokendance: where its rounds were asked to compute masters
  // BenchAgentsOptions::sample: the agents this mode ran (all of its measurements, or tokendance's
  // quality) and, for a mode that ran only them, the run whose messages the other agents replayed.
  std::vector<int> sampled_agents;
  std::string replayed_from;
  std::vector<RoundStats> rounds;
  RoundStats overall;             // sums, and TTFT percentiles over all requests
  // BenchAgentsOptions::find_fit: the most agents whose whole run (every round) neither preempted
  // nor was refused by the budget (0: not even the workload's smallest count), and the runs tried.
  int agents_fit_by_running = -1;
  std::vector<FitTrial> fit_trials;
  // Set: the error that ended this mode's run after rounds.size() rounds (no leak check then).
  std::optional<Error> stopped;
  // After the last round every agent's resident context is released, in a seeded random order
  // (release_order_seed), and the KV pool's accounting is read: the blocks still referenced (masters,
  // compressed diffs, kept blocks) and the snapshots still held. Both must be 0, or run_mode fails.
  int64_t blocks_held_after_release = -1;
  int64_t snapshots_after_release = -1;
  uint64_t release_order_seed = 0;
};

struct BenchAgentsReport {
  std::string model;
  std::string workload;
  int n_agents = 0;
  int n_rounds = 0;
  int64_t kv_budget_bytes = 0;
  int64_t bytes_per_block = 0;
  int threads = 0;
  std::vector<ModeReport> modes;
};

// The seeded sample of k of the agents 0..n_agents-1 (BenchAgentsOptions::sample): the same on every
// platform for a seed; every agent when k <= 0 or k >= n_agents.
std::set<int> sample_of_agents(int n_agents, int k, uint64_t seed);

// A mode whose run fails part-way ends the benchmark with its error; what_ran (when given) then holds
// the modes that ran, the failed one with its completed rounds and `stopped`, so a long run that fails
// in its last round still reports the rounds it measured.
Result<BenchAgentsReport> run_bench_agents(const LoadedModel& lm, ThreadPool& pool, const BenchAgentsOptions& opt,
                                           BenchAgentsReport* what_ran = nullptr);

// The report as JSON (the --json file the charts script reads).
void to_json(Json& j, const ModeReport& m);
void to_json(Json& j, const BenchAgentsReport& r);
std::string bench_agents_table(const BenchAgentsReport& r);
// The charts are drawn by scripts/plot_bench_agents.py (matplotlib) from the JSON report. The
// interpreter is $AGENTKV_PYTHON, else the python3 with matplotlib that CMake found; the script is in
// $AGENTKV_SCRIPTS, else in the source tree's scripts/. check_bench_agents_plot says what is missing
// (naming the Debian package) before a run spends its time; bench_agents_plot draws json_path into png_path.
Status check_bench_agents_plot();
Status bench_agents_plot(const std::string& json_path, const std::string& png_path);

}  // namespace agentkv
