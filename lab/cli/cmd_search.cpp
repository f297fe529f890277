#include <algorithm>
#include <array>
#include <cstdio>
#include <string>

#include "cli/arg_parser.h"
#include "cli/commands.h"
#include "lab/cli/lab_commands.h"
#include "lab/cli/policy_sampling_args.h"
#include "lab/prm/best_of_n.h"
#include "lab/prm/paired_accuracy.h"
#include "prm/calibration_file.h"
#include "lab/prm/step_beam.h"

namespace agentkv {
namespace {

// Every later scorer against the first, on the same problems (and, for best-of-N, the same samples).
void print_paired_comparisons(const std::vector<std::string>& names, const std::vector<std::vector<bool>>& correct) {
  for (size_t i = 1; i < correct.size(); ++i)
    std::printf("%s vs %s: %s\n", names[i].c_str(), names[0].c_str(),
                prm::describe(prm::compare_paired(correct[i], correct[0])).c_str());
}

}  // namespace

int cmd_search(int argc, char** argv) {
  std::string model = "smollm2", task = "arith", method = "bestofn", scorers = "kvprm", calibration, adapter,
              score_at = "steps";
  int64_t problems = 32, threads = 0, width = 2, max_steps = 8, ops = 0;
  PolicySamplingArgs sampling;
  ArgParser p("search",
              "Test-time search on held-out problems. bestofn: the policy samples -n solutions per problem and each "
              "scorer picks one (all scorers see the same samples). beam: step-level beam search, --width beams per "
              "problem, -n proposed lines per beam and step, ranked by the scorer. Prints each scorer's accuracy, and each later "
              "scorer against the first on the same problems: the accuracy difference with its 95% confidence "
              "interval and the exact McNemar p-value.");
  p.add_string("-m,--model", &model, "model alias (smollm2, gemma3) or .gguf path");
  p.add_string("--task", &task, "task (arith)");
  p.add_string("--method", &method, "search method (bestofn, beam)");
  p.add_int("--width", &width, "beam: beams kept per problem", 1, 64);
  p.add_int("--max-steps", &max_steps, "beam: most step rounds", 1, 64);
  p.add_string("--scorer", &scorers, "comma-separated scorers: kvprm, textprm, logprob, vote, kvprm-vote (bestofn: vote weighted by the KV-PRM's P(correct))");
  p.add_string("--calibration", &calibration, "fit-prm's calibration file (default: identity calibration)");
  p.add_string("--adapter", &adapter, "fit-prm --lora's adapter file: the verifier with its trained LoRA adapters (not with --calibration)");
  p.add_string("--score-at", &score_at,
               "bestofn: where kvprm and textprm read a solution: steps (its weakest \"Step\" line, a process "
               "verifier) or solution (one verify token after the whole solution, answer line included: for an "
               "adapter from fit-prm --lora --solutions)");
  sampling.declare(p);
  p.add_int("--problems", &problems, "held-out problems", 1, 100000);
  p.add_int("--ops", &ops, "operations per problem, 1..3 (0: the task's 2 or 3)", 0, 3);
  p.add_threads(&threads);
  if (auto rc = p.parse_command(argc, argv)) return *rc;
  if (task != "arith") return cli_fail("--task: only 'arith' is implemented");
  if (method != "bestofn" && method != "beam") return cli_fail("--method: '" + method + "' is not bestofn or beam");
  const bool beam = method == "beam";
  auto at = prm::parse_prm_score_at(score_at);
  if (!at.ok()) return cli_fail("--score-at: " + at.error());
  if (beam && *at != prm::PrmScoreAt::kWeakestStep)
    return cli_fail("--score-at solution is for bestofn; a beam ranks its partial solutions step by step");
  std::vector<prm::BestOfNScorer> kinds;
  std::vector<prm::BeamScorer> beam_kinds;
  for (const std::string& s : split_commas(scorers)) {
    if (beam) {
      auto k = prm::parse_beam_scorer(s);
      if (!k.ok()) return cli_fail("--scorer: " + k.error());
      beam_kinds.push_back(*k);
      continue;
    }
    auto k = prm::parse_best_of_n_scorer(s);
    if (!k.ok()) return cli_fail("--scorer: " + k.error());
    kinds.push_back(*k);
  }
  auto lm = load_model(model);
  if (!lm.ok()) return cli_fail(lm.error());
  auto head = load_verify_head(**lm, calibration, adapter);
  if (!head.ok()) return cli_fail(head.error());
  ThreadPool pool{int(threads)};
  std::vector<prm::ArithProblem> probs;
  for (int64_t i = 0; i < problems; ++i)
    probs.push_back(prm::generate_arith_problem(prm::arith_seed(prm::ArithSplit::kHeldOut, uint64_t(i)),
                                                ops == 0 ? prm::ArithShape{} : prm::ArithShape{int(ops), int(ops)}));
  const std::vector<std::string> names = split_commas(scorers);
  if (beam) {
    prm::BeamOptions bo;
    bo.width = int(width);
    bo.max_steps = int(max_steps);
    bo.sampling = sampling.propose_options();
    std::vector<std::vector<bool>> correct;
    for (size_t i = 0; i < beam_kinds.size(); ++i) {
      auto r = prm::step_beam_search(**lm, probs, beam_kinds[i], *head, bo, pool);
      if (!r.ok()) return cli_fail(r.error());
      std::printf("%-8s beam W=%lld N=%lld: %lld / %lld correct (%.1f%%), %lld policy lines (%lld tokens), "
                  "%lld scored, scoring %.2f s, total %.2f s\n",
                  names[i].c_str(), (long long)width, (long long)sampling.n, (long long)r->n_correct,
                  (long long)r->n_problems, 100.0 * double(r->n_correct) / double(std::max<int64_t>(1, r->n_problems)),
                  (long long)r->policy_lines, (long long)r->policy_tokens, (long long)r->scored_candidates,
                  r->seconds_scoring, r->seconds_total);
      correct.push_back(r->correct);
    }
    print_paired_comparisons(names, correct);
    return 0;
  }
  auto cands = prm::sample_candidates(**lm, probs, sampling.options(), pool);
  if (!cands.ok()) return cli_fail(cands.error());
  {
    // What there is to choose from, as the checker sees it, and why the right-answer candidates'
    // steps fail (the first wrong step's kind of error).
    int64_t n = 0, steps_right = 0, answer_right = 0, both = 0, no_step = 0;
    std::array<int64_t, prm::kStepErrorKinds> first_error{};
    for (const prm::ProblemCandidates& pc : *cands)
      for (const prm::Candidate& c : pc.candidates) {
        const bool sr = !c.check.steps.empty() && c.check.all_steps_correct;
        ++n;
        steps_right += sr;
        answer_right += c.check.answer_correct;
        both += sr && c.check.answer_correct;
        no_step += c.check.steps.empty();
        if (!c.check.answer_correct) continue;
        if (const prm::StepCheck* wrong = c.check.first_wrong_step()) ++first_error[size_t(wrong->error())];
      }
    std::printf("candidates: %lld; every step right %lld, answer right %lld, both %lld, no step line %lld\n",
                (long long)n, (long long)steps_right, (long long)answer_right, (long long)both, (long long)no_step);
    std::string kinds_text;
    for (int k = 1; k < prm::kStepErrorKinds; ++k)
      kinds_text += std::string(kinds_text.empty() ? "" : ", ") + prm::step_error_name(prm::StepError(k)) + " " +
                    std::to_string(first_error[size_t(k)]);
    std::printf("right-answer candidates' first wrong step: %s\n", kinds_text.c_str());
  }
  std::vector<std::vector<bool>> correct;
  for (size_t i = 0; i < kinds.size(); ++i) {
    auto r = prm::best_of_n(**lm, *cands, kinds[i], *head, pool, *at);
    if (!r.ok()) return cli_fail(r.error());
    std::printf("%-8s best-of-%lld: %lld / %lld correct (%.1f%%), oracle %lld, scoring %.2f s; chosen with every "
                "step right %lld, with no step %lld\n",
                names[i].c_str(), (long long)sampling.n, (long long)r->n_correct, (long long)r->n_problems,
                100.0 * double(r->n_correct) / double(std::max<int64_t>(1, r->n_problems)), (long long)r->n_oracle,
                r->seconds_scoring, (long long)r->n_chosen_steps_right, (long long)r->n_chosen_no_step);
    correct.push_back(r->correct);
  }
  print_paired_comparisons(names, correct);
  return 0;
}

}  // namespace agentkv
