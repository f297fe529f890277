#include <cstdio>

#include "cli/arg_parser.h"
#include "cli/commands.h"
#include "cli/policy_sampling_args.h"
#include "prm/best_of_n.h"
#include "prm/calibration_file.h"

namespace agentkv {

int cmd_search(int argc, char** argv) {
  std::string model = "smollm2", task = "arith", method = "bestofn", scorers = "kvprm", calibration;
  int64_t problems = 32, threads = 0;
  PolicySamplingArgs sampling;
  ArgParser p("search",
              "Test-time search on held-out problems: the policy samples -n solutions per problem and each scorer "
              "picks one; prints the accuracy of every scorer on the same samples.");
  p.add_string("-m,--model", &model, "model alias (smollm2, gemma3) or .gguf path");
  p.add_string("--task", &task, "task (arith)");
  p.add_string("--method", &method, "search method (bestofn)");
  p.add_string("--scorer", &scorers, "comma-separated scorers: kvprm, textprm, logprob, vote");
  p.add_string("--calibration", &calibration, "fit-prm's calibration file (default: identity calibration)");
  sampling.declare(p);
  p.add_int("--problems", &problems, "held-out problems", 1, 100000);
  p.add_int("-t,--threads", &threads, "threads (0 = all cores)", 0, 1024);
  if (auto rc = p.parse_command(argc, argv)) return *rc;
  if (task != "arith") return cli_fail("--task: only 'arith' is implemented");
  if (method != "bestofn") return cli_fail("--method: only 'bestofn' is implemented");
  std::vector<prm::BestOfNScorer> kinds;
  for (const std::string& s : split_commas(scorers)) {
    auto k = prm::parse_best_of_n_scorer(s);
    if (!k.ok()) return cli_fail("--scorer: " + k.error());
    kinds.push_back(*k);
  }
  auto lm = load_model(model);
  if (!lm.ok()) return cli_fail(lm.error());
  auto head = prm::make_verify_head(*(*lm)->tokenizer);
  if (!head.ok()) return cli_fail(head.error());
  if (!calibration.empty()) {
    auto rec = prm::read_calibration(calibration);
    if (!rec.ok()) return cli_fail(rec.error());
    auto h = prm::head_from_record(*rec, *(*lm)->tokenizer, (*lm)->fingerprint);
    if (!h.ok()) return cli_fail(h.error());
    head = std::move(h);
  }
  ThreadPool pool{int(threads)};
  std::vector<prm::ArithProblem> probs;
  for (int64_t i = 0; i < problems; ++i)
    probs.push_back(prm::generate_arith_problem(prm::arith_seed(prm::ArithSplit::kHeldOut, uint64_t(i))));
  auto cands = prm::sample_candidates(**lm, probs, sampling.options(), pool);
  if (!cands.ok()) return cli_fail(cands.error());
  const std::vector<std::string> names = split_commas(scorers);
  for (size_t i = 0; i < kinds.size(); ++i) {
    auto r = prm::best_of_n(**lm, *cands, kinds[i], *head, pool);
    if (!r.ok()) return cli_fail(r.error());
    std::printf("%-8s best-of-%lld: %lld / %lld correct (%.1f%%), oracle %lld, scoring %.2f s\n", names[i].c_str(),
                (long long)sampling.n, (long long)r->n_correct, (long long)r->n_problems,
                100.0 * double(r->n_correct) / double(std::max<int64_t>(1, r->n_problems)), (long long)r->n_oracle,
                r->seconds_scoring);
  }
  return 0;
}

}  // namespace agentkv
