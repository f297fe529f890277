// agentkv chat-quality: the chat-sharing quality gate's measurement (engine/chat_sharing_gate.h) at
// several R, measured afresh (no cache): the quality of the served chat path against exact prefill,
// for BENCHMARKS.md's "quality against R" and for choosing --recompute; per diff format of the stored
// contexts, and (--gate rounds) the rounds gate's workload too, for choosing --diff-format.
#include <cstdio>
#include <cstdlib>
#include <string>

#include "cli/arg_parser.h"
#include "cli/commands.h"
#include "engine/chat_sharing_gate.h"
#include "engine/sharing_gate.h"
#include "lab/cli/lab_commands.h"

namespace agentkv {

int cmd_chat_quality(int argc, char** argv) {
  std::string model = "smollm2", ratios_arg = "0,0.05,0.15,0.3,0.5,1";
  int64_t threads = 0;
  ArgParser p("chat-quality",
              "Runs the chat-sharing quality gate's group chat (4 agents, 8 turns, each request = own system prompt + "
              "the shared transcript) through the served chat-sharing path at each R, and compares every answer that "
              "reused KV approximately with exact prefill: KL mean / p95 of the next-token distributions, top-1 "
              "agreement, greedy agreement of the first 32 tokens, and the gate's verdict at the committed thresholds.");
  p.add_string("-m,--model", &model, "model alias (smollm2, gemma3) or .gguf path");
  p.add_string("--recompute", &ratios_arg, "comma-separated shares R of shared tokens recomputed, each in [0, 1]");
  std::string formats_arg = "f16", gate = "chat";
  p.add_string("--gate", &gate,
               "chat: the chat-sharing gate's group chat; rounds: the rounds gate's workload (4 agents, 3 collective "
               "rounds, each resuming its stored context, whose blocks it keeps)");
  p.add_string("--diff-format", &formats_arg,
               "comma-separated diff formats of the stored contexts (f16, int8, int4), each measured at every R");
  p.add_threads(&threads);
  if (auto rc = p.parse_command(argc, argv)) return *rc;
  std::vector<double> ratios;
  for (const std::string& s : split_commas(ratios_arg)) {
    char* end = nullptr;
    const double v = std::strtod(s.c_str(), &end);
    if (end == s.c_str() || *end != '\0' || !(v >= 0 && v <= 1)) return cli_fail("--recompute: '" + s + "' is not in [0, 1]");
    ratios.push_back(v);
  }
  if (ratios.empty()) return cli_fail("--recompute: no ratios given");
  if (gate != "chat" && gate != "rounds") return cli_fail("--gate: '" + gate + "' is not chat or rounds");
  std::vector<DiffFormat> formats;
  for (const std::string& s : split_commas(formats_arg)) {
    auto f = parse_diff_format(s);
    if (!f.ok()) return cli_fail("--diff-format: " + f.error());
    formats.push_back(*f);
  }
  auto lm = load_model(model);
  if (!lm.ok()) return cli_fail(lm.error());
  ThreadPool pool{int(threads)};
  std::printf("%-6s %-6s %8s %8s %8s %8s %8s  %s\n", "R", "diffs", "answers", "KL_mean", "KL_p95", "top1", "greedy",
              "gate");
  for (double r : ratios)
    for (DiffFormat f : formats) {
      GatePath path;
      path.format = f;
      auto g = gate == "chat" ? run_chat_sharing_gate(**lm, pool, r, kSharingGateThresholds, "", f)
                              : run_sharing_gate(**lm, pool, r, kSharingGateThresholds, "", path);
      if (!g.ok()) return cli_fail("R=" + std::to_string(r) + ": " + g.error());
      std::printf("%-6.3g %-6s %8d %8.4f %8.4f %8.3f %8.3f  %s\n", r, std::string(diff_format_name(f)).c_str(),
                  g->agents, g->kl_mean, g->kl_p95, g->top1, g->greedy, g->pass ? "pass" : "FAIL");
      std::fflush(stdout);
    }
  return 0;
}

}  // namespace agentkv
