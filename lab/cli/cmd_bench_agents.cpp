// agentkv bench-agents: options, the run, the table on stdout, and the JSON report and its charts.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>

#include "lab/agents/bench_agents.h"
#include "cli/arg_parser.h"
#include "cli/commands.h"
#include "engine/compact_context.h"
#include "lab/cli/lab_commands.h"
#include "kv/kv_manager.h"

namespace agentkv {

int cmd_bench_agents(int argc, char** argv) {
  std::string model = "smollm2", workload = "generative-agents", modes = "prefix", json_out, plot_out;
  std::string recompute = "0.15", diff_formats = "f16", fit_from, echo_keeps = "off", master_context = "block";
  bool no_quality = false, find_fit = false, resume_in_attention = false;
  int64_t agents = 0, rounds = 0, sample = 0, seed = 1, digest_messages = WorkloadOptions{}.digest_messages, threads = 0, block_size = 16, batch_tokens = 512, kv_mem = 0;
  bool quiet = false;
  std::string workload_help = "workload:";
  for (auto& w : workload_names()) workload_help += " " + w;
  ArgParser p("bench-agents",
              "Runs a multi-agent workload on the engine and reports prefill, latency, TTFT and KV per agent per mode.");
  p.add_string("-m,--model", &model, "model alias (smollm2, gemma3) or .gguf path");
  p.add_string("-w,--workload", &workload, workload_help);
  p.add_int("--agents", &agents, "agents (0 = the workload's default)", 0, 100000);
  p.add_int("--rounds", &rounds, "rounds (0 = the workload's default)", 0, 10000);
  p.add_int("--seed", &seed, "workload seed", 0, int64_t(1) << 62);
  p.add_int("--digest-messages", &digest_messages,
            "town workloads: a round's digest quotes at most this many of the previous round's messages", 1, 1000);
  p.add_string("--mode", &modes, "KV mode, or a comma list run one after another: nocache, prefix, tokendance");
  p.add_string("--recompute", &recompute,
               "tokendance: share of the shared segment recomputed per agent, or a comma list (one run each)");
  p.add_string("--diff-format", &diff_formats,
               "tokendance: how each agent's diff rows are stored (f16 bit for bit, int8, int4), or a comma list (one "
               "run each); quality is measured on the context as stored");
  p.add_flag("--resume-in-attention", &resume_in_attention,
             "tokendance: each turn reads its master–diff context inside attention (the masters in place, its diff "
             "rows over them) instead of restoring a dense copy first");
  p.add_string("--master-context", &master_context,
               "tokendance: where each round's shared block's master is computed: block ([BOS][block], on its own) "
               "or agent (a sharing agent's own context up to the block's end, the one the prefix cache holds most "
               "of, prefilled exactly: the others' rows deviate less from their exact ones, at the cost of that "
               "context's uncached prefill once a round; [BOS][block] in a round whose budget it would crowd)");
  p.add_string("--echo-keep", &echo_keeps,
               "tokendance: off, or the share (0-1) of an echo's rows kept: an agent's own earlier text (its last "
               "answer) that the round's shared block quotes is stored as the block master's rows plus that share of "
               "its rows, those deviating most (an approximation, measured with the rest); a comma list runs each");
  p.add_flag("--no-quality", &no_quality, "tokendance: skip the quality comparison with the exact context");
  p.add_int("--sample", &sample,
            "run the expensive measurements on a seeded random sample of this many agents (0 = every agent): "
            "tokendance's quality, and the whole of the nocache and prefix modes, which then run only the sampled "
            "agents and replay everyone else's messages from the tokendance run (run first; per-agent figures are "
            "the sample's)",
            0, 100000);
  p.add_kv_mem(&kv_mem, "KV budget in bytes, e.g. 2G (default: a quarter of RAM)");
  p.add_flag("--find-fit", &find_fit,
             "also find, per mode, how many agents fit --kv-mem by running them: the workload again at doubling "
             "agent counts until a round preempts, is refused, runs in waves (its turns not fitting at once) or, with "
             "prefix caching, a turn finds part of its agent's history evicted since the last round (held contexts are "
             "the point: tokendance retains every agent's), then bisecting (quality not measured there)");
  p.add_string("--fit-from", &fit_from,
               "with --find-fit: MODE=N[,MODE=N...], e.g. prefix=20,tokendance=120: that mode's search starts at N agents "
               "(e.g. bench-agents' count computed from the final contexts), stepping by an eighth up or down until the "
               "outcome turns, then bisecting, instead of doubling from the smallest: fewer trials at large counts");
  p.add_int("--block-size", &block_size, "tokens per KV block", 1, 1024);
  p.add_int("--batch-tokens", &batch_tokens, "tokens per forward pass", 1, 1 << 16);
  p.add_threads(&threads);
  p.add_string("--json", &json_out, "write the report as JSON to this file");
  p.add_string("--plot", &plot_out,
               "draw the charts into this PNG file: runs scripts/plot_bench_agents.py (python3 and matplotlib, "
               "Debian python3-matplotlib) on the JSON report (--json, or a temporary file); AGENTKV_PYTHON "
               "names the interpreter, AGENTKV_SCRIPTS the scripts folder (default: this build's source tree)");
  p.add_flag("-q,--quiet", &quiet, "no progress bar");
  if (auto rc = p.parse_command(argc, argv)) return *rc;

  BenchAgentsOptions opt;
  opt.workload = workload;
  opt.resume_in_attention = resume_in_attention;
  opt.workload_opt.n_agents = int(agents);
  opt.workload_opt.n_rounds = int(rounds);
  opt.workload_opt.seed = uint64_t(seed);
  opt.workload_opt.digest_messages = int(digest_messages);
  opt.modes = split_commas(modes);
  opt.block_size = int(block_size);
  opt.max_batch_tokens = int(batch_tokens);
  opt.progress = !quiet;
  opt.quality = !no_quality;
  opt.find_fit = find_fit;
  for (const std::string& item : split_commas(fit_from)) {
    const size_t eq = item.find('=');
    const std::string mode = item.substr(0, std::min(eq, item.size()));
    char* end = nullptr;
    const long n = eq == std::string::npos ? 0 : std::strtol(item.c_str() + eq + 1, &end, 10);
    if (eq == std::string::npos || eq + 1 == item.size() || end != item.c_str() + item.size() || n < 1 || n > (1 << 20))
      return cli_fail("--fit-from: '" + item + "' is not MODE=N with N a positive agent count");
    if (std::find(opt.modes.begin(), opt.modes.end(), mode) == opt.modes.end())
      return cli_fail("--fit-from: '" + mode + "' is not one of --mode's modes");
    opt.fit_from[mode] = int(n);
  }
  if (!opt.fit_from.empty() && !find_fit) return cli_fail("--fit-from needs --find-fit");
  opt.sample = int(sample);
  opt.recompute.clear();
  for (const std::string& r : split_commas(recompute)) {
    char* end = nullptr;
    const double v = std::strtod(r.c_str(), &end);
    if (r.empty() || end != r.c_str() + r.size() || !(v >= 0 && v <= 1))
      return cli_fail("--recompute: '" + r + "' is not a ratio in [0, 1]");
    opt.recompute.push_back(v);
  }
  opt.diff_formats.clear();
  for (const std::string& f : split_commas(diff_formats)) {
    auto format = parse_diff_format(f);
    if (!format.ok()) return cli_fail("--diff-format: " + format.error());
    opt.diff_formats.push_back(*format);
  }
  auto master = parse_master_context(master_context);
  if (!master.ok()) return cli_fail("--master-context: " + master.error());
  opt.master_context = *master;
  opt.echo_keeps.clear();
  for (const std::string& e : split_commas(echo_keeps)) {
    auto keep = parse_echo_keep(e);
    if (!keep.ok()) return cli_fail("--echo-keep: " + keep.error());
    opt.echo_keeps.push_back(*keep);
  }
  if (opt.echo_keeps.empty()) return cli_fail("--echo-keep: give off or a share in [0, 1]");
  opt.kv_mem = kv_mem;
  // Check the workload before loading the model: a typo should not cost a model load.
  if (auto wl = make_workload(opt.workload, opt.workload_opt); !wl.ok()) return cli_fail(wl.error());
  for (auto& m : opt.modes)
    if (m != "nocache" && m != "prefix" && m != "tokendance")
      return cli_fail("--mode: unknown mode '" + m + "' (choose nocache, prefix, tokendance)");
  if (!plot_out.empty())
    if (Status st = check_bench_agents_plot(); !st.ok()) return cli_fail(st.error());
  auto lm = load_model(model);
  if (!lm.ok()) return cli_fail(lm.error());
  ThreadPool pool{int(threads)};
  BenchAgentsReport what_ran;
  auto rep = run_bench_agents(**lm, pool, opt, &what_ran);
  if (!rep.ok() && what_ran.modes.empty()) return cli_fail(rep.error());
  // A mode that stopped part-way: its completed rounds (and the modes before it) are still reported,
  // then the command fails with the error.
  const BenchAgentsReport& report = rep.ok() ? *rep : what_ran;
  std::fputs(bench_agents_table(report).c_str(), stdout);
  // The charts are drawn from the JSON report, so --plot alone writes it to a temporary file.
  std::string json_path = json_out;
  if (json_path.empty() && !plot_out.empty()) {
    const char* tmp = std::getenv("TMPDIR");
    std::string name = std::string(tmp && *tmp ? tmp : "/tmp") + "/agentkv-bench-agents-XXXXXX.json";
    const int fd = mkstemps(name.data(), 5);
    if (fd < 0) return cli_fail("--plot: cannot create a temporary file " + name);
    close(fd);
    json_path = name;
  }
  if (!json_path.empty()) {
    std::ofstream f(json_path);
    f << dump_json(report) << "\n";
    if (!f) return cli_fail("cannot write " + json_path);
  }
  if (!plot_out.empty()) {
    const Status st = bench_agents_plot(json_path, plot_out);
    if (json_out.empty()) std::remove(json_path.c_str());
    if (!st.ok()) return cli_fail(st.error());
  }
  return rep.ok() ? 0 : cli_fail(rep.error());
}

}  // namespace agentkv
