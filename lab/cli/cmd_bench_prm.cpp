#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "cli/arg_parser.h"
#include "cli/commands.h"
#include "lab/cli/lab_commands.h"
#include "lab/prm/arith_prompt.h"
#include "prm/calibration_file.h"
#include "lab/prm/scoring_bench.h"

namespace agentkv {

int cmd_bench_prm(int argc, char** argv) {
  std::string model = "smollm2", lengths_arg = "256,512,1024,2048,4096", calibration, adapter;
  int64_t repeats = 3, threads = 0;
  ArgParser p("bench-prm",
              "Cost of scoring one step after a trajectory of L tokens: KV-PRM (verify tokens only, reading the "
              "policy's cache) against the text PRM (re-encodes the trajectory). Prints median latency, counted "
              "flops and the KV bytes each needs, per L. The trajectory is an arith prompt followed by reference "
              "solutions of successive problems, cut to L tokens.");
  p.add_string("-m,--model", &model, "model alias (smollm2, gemma3) or .gguf path");
  p.add_string("--lengths", &lengths_arg, "comma-separated trajectory lengths in tokens");
  p.add_string("--calibration", &calibration, "fit-prm's calibration file (default: the untrained head)");
  p.add_string("--adapter", &adapter, "fit-prm --lora's adapter file: the verifier with its trained LoRA adapters (not with --calibration)");
  p.add_int("--repeats", &repeats, "timed repeats per length (the median is printed)", 1, 100);
  p.add_threads(&threads);
  if (auto rc = p.parse_command(argc, argv)) return *rc;
  std::vector<int64_t> lengths;
  for (const std::string& s : split_commas(lengths_arg)) {
    char* end = nullptr;
    const long long v = std::strtoll(s.c_str(), &end, 10);
    if (end == s.c_str() || *end != '\0' || v < 1) return cli_fail("--lengths: '" + s + "' is not a positive integer");
    lengths.push_back(v);
  }
  if (lengths.empty()) return cli_fail("--lengths: no lengths given");
  auto lm = load_model(model);
  if (!lm.ok()) return cli_fail(lm.error());
  const Tokenizer& tok = *(*lm)->tokenizer;
  auto head = load_verify_head(**lm, calibration, adapter);
  if (!head.ok()) return cli_fail(head.error());
  const int64_t longest = *std::max_element(lengths.begin(), lengths.end());
  auto prompt = prm::arith_policy_prompt(tok, prm::generate_arith_problem(prm::arith_seed(prm::ArithSplit::kHeldOut, 0)));
  if (!prompt.ok()) return cli_fail(prompt.error());
  std::vector<int32_t> traj = tok.encode(*prompt, tok.add_bos_default(), true);
  for (uint64_t i = 0; int64_t(traj.size()) < longest; ++i) {
    const auto more = tok.encode(prm::format_solution(prm::generate_arith_problem(prm::arith_seed(prm::ArithSplit::kHeldOut, i))),
                                 false, false);
    traj.insert(traj.end(), more.begin(), more.end());
  }
  ThreadPool pool{int(threads)};
  auto costs = prm::measure_scoring_cost(**lm, traj, lengths, *head, int(repeats), pool);
  if (!costs.ok()) return cli_fail(costs.error());
  std::printf("| L tokens | KV-PRM ms | text PRM ms | speed-up | KV-PRM GFLOP | text PRM GFLOP | flop ratio | KV-PRM KV KiB "
              "| text PRM KV KiB | score delta |\n|---|---|---|---|---|---|---|---|---|---|\n");
  for (const prm::ScoringCost& c : *costs)
    std::printf("| %lld | %.1f | %.1f | %.1fx | %.3f | %.2f | %.1fx | %.0f | %.0f | %g |\n", (long long)c.trajectory_tokens,
                1e3 * c.kv_seconds, 1e3 * c.text_seconds, c.text_seconds / c.kv_seconds, c.kv_flops / 1e9,
                c.text_flops / 1e9, c.text_flops / c.kv_flops, double(c.kv_bytes) / 1024, double(c.text_bytes) / 1024,
                c.score_delta);
  return 0;
}

}  // namespace agentkv
