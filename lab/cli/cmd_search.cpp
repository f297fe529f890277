#include <algorithm>
#include <array>
#include <cstdio>
#include <memory>
#include <string>

#include "cli/arg_parser.h"
#include "cli/commands.h"
#include "lab/cli/lab_commands.h"
#include "lab/cli/policy_sampling_args.h"
#include "lab/prm/best_of_n.h"
#include "lab/prm/paired_accuracy.h"
#include "prm/calibration_file.h"
#include "lab/prm/step_beam.h"
#include "lab/prm/step_checker.h"

namespace agentkv {
namespace {

// Every later scorer against the first, on the same problems (and, for best-of-N, the same samples).
void print_paired_comparisons(const std::vector<std::string>& names, const std::vector<std::vector<bool>>& correct) {
  for (size_t i = 1; i < correct.size(); ++i)
    std::printf("%s vs %s: %s\n", names[i].c_str(), names[0].c_str(),
                prm::describe(prm::compare_paired(correct[i], correct[0])).c_str());
}

// One row per problem: the scorer, the problem's index, its right answer, whether the chosen answer is
// right, the checker's verdict on each "Step" line ("+" or the first failed check's kind), and the
// solution's lines joined by " | " (tabs and newlines in a line become spaces: a row stays one row).
void dump_rows(std::FILE* f, const std::string& scorer, std::span<const prm::ArithProblem> problems,
               const std::vector<std::vector<std::string>>& solutions, const std::vector<bool>& correct) {
  for (size_t i = 0; i < solutions.size(); ++i) {
    std::string text, verdicts;
    for (const std::string& line : solutions[i]) {
      if (!text.empty()) text += " | ";
      text += line;
    }
    std::replace_if(text.begin(), text.end(), [](char c) { return c == '\t' || c == '\n' || c == '\r'; }, ' ');
    for (const prm::StepCheck& st : prm::check_lines(solutions[i], problems[i]).steps) {
      if (!verdicts.empty()) verdicts += ',';
      verdicts += st.correct ? "+" : prm::step_error_name(st.error());
    }
    std::fprintf(f, "%s\t%zu\t%lld\t%d\t%s\t%s\n", scorer.c_str(), i, (long long)problems[i].answer,
                 int(correct[i]), verdicts.c_str(), text.c_str());
  }
}

}  // namespace

int cmd_search(int argc, char** argv) {
  std::string model = "smollm2", task = "arith", method = "bestofn", scorers = "kvprm", calibration, adapter,
              score_at = "steps", dump;
  bool offer_answer = false;
  int64_t problems = 32, threads = 0, width = 2, max_steps = 8, ops = 0, kv_mem = prm::BeamOptions{}.kv_mem_bytes;
  PolicySamplingArgs sampling;
  ArgParser p("search",
              "Test-time search on held-out problems. bestofn: the policy samples -n solutions per problem and each "
              "scorer picks one (all scorers see the same samples). beam: step-level beam search, --width beams per "
              "problem, -n proposed lines per beam and step, ranked by the scorer. Prints each scorer's accuracy, and each later "
              "scorer against the first on the same problems: the accuracy difference with its 95% confidence "
              "interval and the exact McNemar p-value.");
  p.add_string("-m,--model", &model, "model alias (smollm2, gemma3) or .gguf path");
  p.add_string("--task", &task, "task (arith)");
  p.add_string("--method", &method,
               "search method: bestofn, beam, or bestofn,beam (both on the same problems, compared; best-of-N then "
               "draws --width x -n solutions, as many as the beam proposes lines per step round, and scorers "
               "prefixed beam: are the beam's)");
  p.add_int("--width", &width, "beam: beams kept per problem", 1, 64);
  p.add_int("--max-steps", &max_steps, "beam: most step rounds", 1, 64);
  p.add_flag("--offer-answer", &offer_answer,
             "beam, PRM scorers: after each step also offer the policy's greedy 'Answer:' line as a candidate that "
             "ends the beam, and rate answer lines with the verifier like steps, so the verifier decides when a "
             "solution is done");
  p.add_kv_mem(&kv_mem, "beam: KV budget for the beams' caches, e.g. 8G");
  p.add_string("--scorer", &scorers, "comma-separated scorers: kvprm, textprm, logprob, vote, kvprm-vote (bestofn: vote weighted by the KV-PRM's P(correct))");
  p.add_string("--calibration", &calibration, "fit-prm's calibration file (default: identity calibration)");
  p.add_string("--adapter", &adapter, "fit-prm --lora's adapter file: the verifier with its trained LoRA adapters (not with --calibration)");
  p.add_string("--score-at", &score_at,
               "bestofn: where kvprm and textprm read a solution: steps (its weakest \"Step\" line, a process "
               "verifier) or solution (one verify token after the whole solution, answer line included: for an "
               "adapter from fit-prm --lora --solutions)");
  sampling.declare(p);
  p.add_int("--problems", &problems, "held-out problems", 1, 100000);
  p.add_string("--dump", &dump, "also write each scorer's chosen solution per problem as TSV (scorer, problem, its answer, right, the checker's verdict per step, the lines joined by ' | ')");
  p.add_int("--ops", &ops, "operations per problem, 1..3 (0: the task's 2 or 3)", 0, 3);
  p.add_threads(&threads);
  if (auto rc = p.parse_command(argc, argv)) return *rc;
  if (task != "arith") return cli_fail("--task: only 'arith' is implemented");
  bool do_best = false, do_beam = false;
  for (const std::string& m : split_commas(method)) {
    if (m != "bestofn" && m != "beam") return cli_fail("--method: '" + m + "' is not bestofn or beam");
    bool& flag = m == "bestofn" ? do_best : do_beam;
    if (flag) return cli_fail("--method: '" + m + "' is named twice");
    flag = true;
  }
  if (!do_best && !do_beam) return cli_fail("--method: name bestofn, beam or both");
  if (offer_answer && !do_beam) return cli_fail("--offer-answer is for --method beam");
  auto at = prm::parse_prm_score_at(score_at);
  if (!at.ok()) return cli_fail("--score-at: " + at.error());
  if (!do_best && *at != prm::PrmScoreAt::kWeakestStep)
    return cli_fail("--score-at solution is for bestofn; a beam ranks its partial solutions step by step");
  // Each scorer is one method's: with both methods, a "beam:" prefix marks the beam's.
  struct Entry {
    std::string name;
    bool beam = false;
    prm::BestOfNScorer best{};
    prm::BeamScorer step{};
  };
  std::vector<Entry> entries;
  for (const std::string& s : split_commas(scorers)) {
    const bool prefixed = s.rfind("beam:", 0) == 0;
    if (prefixed && !do_beam) return cli_fail("--scorer: '" + s + "' needs --method beam");
    Entry e{s, prefixed || !do_best};
    const std::string bare = prefixed ? s.substr(5) : s;
    if (e.beam) {
      auto k = prm::parse_beam_scorer(bare);
      if (!k.ok()) return cli_fail("--scorer: " + k.error());
      e.step = *k;
    } else {
      auto k = prm::parse_best_of_n_scorer(bare);
      if (!k.ok()) return cli_fail("--scorer: " + k.error());
      e.best = *k;
    }
    entries.push_back(std::move(e));
  }
  if (entries.empty()) return cli_fail("--scorer: name at least one scorer");
  const auto has = [&](bool beam) {
    return std::any_of(entries.begin(), entries.end(), [&](const Entry& e) { return e.beam == beam; });
  };
  if (do_best && !has(false)) return cli_fail("--method bestofn: no --scorer is best-of-N's (those without beam:)");
  if (do_beam && do_best && !has(true)) return cli_fail("--method beam: no --scorer is the beam's (prefix it beam:)");
  auto lm = load_model(model);
  if (!lm.ok()) return cli_fail(lm.error());
  auto head = load_verify_head(**lm, calibration, adapter);
  if (!head.ok()) return cli_fail(head.error());
  ThreadPool pool{int(threads)};
  std::vector<prm::ArithProblem> probs;
  for (int64_t i = 0; i < problems; ++i)
    probs.push_back(prm::generate_arith_problem(prm::arith_seed(prm::ArithSplit::kHeldOut, uint64_t(i)),
                                                ops == 0 ? prm::ArithShape{} : prm::ArithShape{int(ops), int(ops)}));
  // Equal policy samples: with both methods, best-of-N draws as many solutions per problem as the
  // beam proposes lines per step round (width x n).
  PolicySamplingArgs best_sampling = sampling;
  if (do_beam && do_best) best_sampling.n = width * sampling.n;
  Result<std::vector<prm::ProblemCandidates>> cands = std::vector<prm::ProblemCandidates>{};
  if (do_best) {
    cands = prm::sample_candidates(**lm, probs, best_sampling.options(), pool);
    if (!cands.ok()) return cli_fail(cands.error());
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
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> dump_file(nullptr, &std::fclose);
  if (!dump.empty()) {
    dump_file.reset(std::fopen(dump.c_str(), "w"));
    if (!dump_file) return cli_fail("--dump: cannot write '" + dump + "'");
    std::fprintf(dump_file.get(), "scorer\tproblem\tanswer\tright\tsteps\tsolution\n");
  }
  std::vector<std::string> names;
  std::vector<std::vector<bool>> correct;
  for (const Entry& e : entries) {
    names.push_back(e.name);
    if (e.beam) {
      prm::BeamOptions bo;
      bo.width = int(width);
      bo.max_steps = int(max_steps);
      bo.kv_mem_bytes = kv_mem;
      bo.offer_answer = offer_answer;
      bo.sampling = sampling.propose_options();
      auto r = prm::step_beam_search(**lm, probs, e.step, *head, bo, pool);
      if (!r.ok()) return cli_fail(r.error());
      std::printf("%-8s beam W=%lld N=%lld: %lld / %lld correct (%.1f%%), %lld policy lines (%lld tokens), "
                  "%lld scored, scoring %.2f s, total %.2f s\n",
                  e.name.c_str(), (long long)width, (long long)sampling.n, (long long)r->n_correct,
                  (long long)r->n_problems, 100.0 * double(r->n_correct) / double(std::max<int64_t>(1, r->n_problems)),
                  (long long)r->policy_lines, (long long)r->policy_tokens, (long long)r->scored_candidates,
                  r->seconds_scoring, r->seconds_total);
      if (dump_file) dump_rows(dump_file.get(), e.name, probs, r->solutions, r->correct);
      correct.push_back(r->correct);
      continue;
    }
    auto r = prm::best_of_n(**lm, *cands, e.best, *head, pool, *at);
    if (!r.ok()) return cli_fail(r.error());
    std::printf("%-8s best-of-%lld: %lld / %lld correct (%.1f%%), oracle %lld, scoring %.2f s; chosen with every "
                "step right %lld, with no step %lld\n",
                e.name.c_str(), (long long)best_sampling.n, (long long)r->n_correct, (long long)r->n_problems,
                100.0 * double(r->n_correct) / double(std::max<int64_t>(1, r->n_problems)), (long long)r->n_oracle,
                r->seconds_scoring, (long long)r->n_chosen_steps_right, (long long)r->n_chosen_no_step);
    if (dump_file) {
      std::vector<std::vector<std::string>> chosen;
      for (size_t i = 0; i < cands->size(); ++i) chosen.push_back((*cands)[i].candidates[r->chosen[i]].line_text);
      dump_rows(dump_file.get(), e.name, probs, chosen, r->correct);
    }
    correct.push_back(r->correct);
  }
  print_paired_comparisons(names, correct);
  return 0;
}

}  // namespace agentkv
