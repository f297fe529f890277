#include <cstdio>
#include <cstring>
#include <cstdlib>

#include "cli/arg_parser.h"
#include "cli/commands.h"
#include "lab/cli/lab_commands.h"
#include "lab/cli/policy_sampling_args.h"
#include "lab/prm/fit_prm.h"

namespace agentkv {

namespace {

int fit_prm_lora_command(const LoadedModel& lm, const prm::FitPrmOptions& o, const prm::FitLoraOptions& lo,
                         const std::string& out, ThreadPool& pool) {
  auto rep = prm::fit_prm_lora(lm, o, lo, pool, [](const std::string& line) { std::fprintf(stderr, "%s\n", line.c_str()); });
  if (!rep.ok()) return cli_fail(rep.error());
  if (Status st = prm::write_adapter_file(out, rep->adapters, rep->record); !st.ok()) return cli_fail(st.error());
  std::printf("adapters: rank %d, scale %g, %zu parameters, %lld train examples; written to %s\n", rep->adapters.rank(),
              double(rep->adapters.scale()), rep->adapters.params().size(), (long long)rep->fit.n_examples, out.c_str());
  for (size_t e = 0; e < rep->fit.epoch_loss.size(); ++e)
    std::printf("epoch %zu: mean train loss %.5f\n", e + 1, rep->fit.epoch_loss[e]);
  if (lo.rollouts.n > 0)
    std::printf("targets:  Monte-Carlo step values, %d rollouts a step; their AUROC against the checker's labels %.4f\n",
                lo.rollouts.n, rep->values_auroc);
  const char* examples = o.solutions ? "solutions" : "steps";
  auto split = [&](const char* name, const prm::SplitFigures& f) {
    std::printf("%s %lld %s, %lld correct; answer AUROC with adapters %.4f, without %.4f; within a problem "
                "(%lld pairs) %.4f, without %.4f\n",
                name, (long long)f.n_steps, examples, (long long)f.n_steps_correct, f.auroc, f.logodds_auroc,
                (long long)f.n_within_pairs, f.within_auroc, f.logodds_within_auroc);
    // Only where the pool differs: a set with answer lines or steps after the solution (--answers, or
    // such a --dump read by --steps).
    if (f.n_steps_before_end > 0 && f.n_steps_before_end < f.n_steps)
      std::printf("%s of which %lld steps before the reference's end (%lld correct), the pool without answer lines: "
                  "AUROC with adapters %.4f, within a problem %.4f\n",
                  std::string(std::strlen(name), ' ').c_str(), (long long)f.n_steps_before_end,
                  (long long)f.n_steps_before_end_correct, f.steps_auroc, f.steps_within_auroc);
    if (f.stops.n_go_on_pairs > 0 || f.stops.n_stop_pairs > 0)
      std::printf("%s the beam's stop decisions, within a prefix, with adapters / without: right next step above a "
                  "wrong answer %.4f / %.4f (%lld pairs); after the whole reference, right answer above a further step "
                  "%.4f / %.4f (%lld pairs)\n",
                  std::string(std::strlen(name), ' ').c_str(), f.stops.go_on_auroc, f.logodds_stops.go_on_auroc,
                  (long long)f.stops.n_go_on_pairs, f.stops.stop_auroc, f.logodds_stops.stop_auroc,
                  (long long)f.stops.n_stop_pairs);
  };
  split("train:   ", rep->train);
  if (o.n_heldout > 0) split("held-out:", rep->heldout);
  return 0;
}

}  // namespace

int cmd_fit_prm(int argc, char** argv) {
  std::string model = "smollm2", out = "prm_calibration.json", dump, sweep_layers, sweep_l2;
  prm::FitPrmOptions o;
  int64_t n_train = o.n_train, n_heldout = o.n_heldout, threads = 0, layer = o.feature_layer, ops = 0;
  double l2 = o.l2;
  PolicySamplingArgs sampling;
  bool lora = false, sgd = false;
  prm::FitLoraOptions lo;
  int64_t rank = lo.rank, epochs = lo.epochs, batch = lo.batch, mc_rollouts = 0, references = -1;
  double alpha = lo.alpha, lr = lo.optimizer.lr, average = lo.average_decay;
  std::string loss = "pairwise";
  ArgParser p("fit-prm",
              "For generated arithmetic problems the policy proposes -n next steps after each prefix of the "
              "reference solution; the exact checker labels them, the KV-PRM reads the verify token's hidden state "
              "from each proposal's cache, and a ridge logistic-regression probe is fitted on it (plus an affine "
              "calibration of the answer tokens' log-odds, the untrained baseline). Writes both with the model's "
              "fingerprint and reports the held-out AUROC.");
  p.add_string("-m,--model", &model, "model alias (smollm2, gemma3) or .gguf path");
  p.add_string("-o,--out", &out, "calibration file to write (JSON)");
  p.add_int("--train", &n_train, "train problems", 1, 100000);
  p.add_int("--heldout", &n_heldout, "held-out problems to report the AUROC on (0: none)", 0, 100000);
  sampling.declare(p);
  p.add_string("--question", &o.question, "the verify question asked after each step");
  p.add_string("--pos", &o.pos, "answer token meaning 'correct'");
  p.add_string("--neg", &o.neg, "answer token meaning 'wrong'");
  p.add_int("--layer", &layer, "block whose output the probe reads (0 = the last)", 0, 1024);
  p.add_float("--l2", &l2, "ridge strength of the probe on standardised features", 1e-8, 1e6);
  p.add_flag("--with-logodds", &o.with_logodds,
             "also fit the answer tokens' log-odds calibration (the untrained baseline; runs the full model)");
  p.add_string("--steps", &o.steps_file, "take the proposals from a --dump file instead of sampling the policy");
  p.add_flag("--answers", &o.with_answers,
             "step proposals also after the whole reference solution, and answer lines kept as examples labelled "
             "by the answer they state: the verifier learns when a solution is done (for search --offer-answer)");
  p.add_flag("--offered-answers", &o.offered_answers,
             "with --answers: also, after each reference prefix of at least one step, the line search --offer-answer "
             "offers there (the policy's greedy line after 'Answer:'), labelled by its answer: an intermediate result "
             "stated as the answer (wrong) against the right next steps, the beam's stop decision");
  p.add_flag("--solutions", &o.solutions,
             "examples are the policy's own whole solutions (-n per problem, --max-tokens long), each labelled by "
             "its final answer, with the verify token after the answer line, instead of one-line proposals after "
             "reference prefixes (for search --score-at solution)");
  p.add_int("--references", &references,
            "--solutions: the train split also holds each problem's reference solution (right) and this many "
            "altered copies, 0..3 (wrong: a slipped last result, a swapped last operation, a wrong answer line); "
            "-1: none. Held-out stays the policy's solutions",
            -1, 3);
  p.add_string("--sweep-layers", &sweep_layers,
               "comma-separated layers to choose from by cross-validation on train (with --sweep-l2)");
  p.add_string("--sweep-l2", &sweep_l2, "comma-separated ridge strengths to choose from (with --sweep-layers)");
  p.add_int("--ops", &ops, "operations per problem, 1..3 (0: the task's 2 or 3; a --steps file needs the --ops it was made with)",
            0, 3);
  p.add_flag("--lora", &lora,
             "train LoRA adapters on the verify token against the labels instead of a probe (KV-PRM); -o is then "
             "the adapter file (default prm_adapters.gguf)");
  p.add_int("--rank", &rank, "--lora: the adapters' rank", 1, 4096);
  p.add_float("--alpha", &alpha, "--lora: the adapters' scale is alpha / rank", 1e-6, 1e6);
  p.add_int("--epochs", &epochs, "--lora: passes over the train steps", 1, 1000);
  p.add_int("--batch", &batch, "--lora: examples per optimizer step", 1, 4096);
  p.add_float("--lr", &lr, "--lora: learning rate", 1e-9, 10);
  p.add_string("--loss", &loss, "--lora: pairwise (the default, chosen by held-out AUROC: a logistic ranking loss over each batch's right/wrong pairs, which shifting every score alike does not change), mse (squared error of P(+), the paper's) or bce (cross-entropy)");
  p.add_flag("--sgd", &sgd, "--lora: plain SGD instead of Adam");
  p.add_flag("--batch-by-problem", &lo.batch_by_problem,
             "--lora: each optimizer step takes one problem's steps (so the pairwise loss compares only steps of "
             "the same problem, as best-of-N does) instead of --batch steps shuffled across problems");
  p.add_float("--average", &average,
              "--lora: write (and score after each epoch) an exponential moving average of the adapters over the "
              "optimizer's steps with this decay, e.g. 0.9; 0: the last step's adapters",
              0, 0.999999);
  p.add_int("--mc-rollouts", &mc_rollouts,
            "--lora: train on Monte-Carlo step values, the share of this many policy rollouts (--max-tokens "
            "long) from after each step that reach the right answer, instead of the checker's labels (0)",
            0, 64);
  p.add_threads(&threads);
  int64_t kv_mem = 0;
  p.add_kv_mem(&kv_mem, "KV budget of the policy contexts (default 1G); --lora keeps the train contexts for the later "
                        "epochs while they take at most half of it");
  p.add_string("--dump", &dump, "also write every labelled proposal as TSV (split, problem, k, label, why, line)");
  if (auto rc = p.parse_command(argc, argv)) return *rc;
  o.n_train = int(n_train);
  o.n_heldout = int(n_heldout);
  o.sampling = sampling.propose_options();
  if (kv_mem > 0) o.sampling.kv_mem_bytes = kv_mem;
  o.solution_max_tokens = int(sampling.max_tokens);
  o.reference_copies = int(references);
  o.feature_layer = int(layer);
  o.l2 = l2;
  if (ops > 0) o.shape = prm::ArithShape{int(ops), int(ops)};
  for (const std::string& s : split_commas(sweep_layers)) {
    char* end = nullptr;
    const long v = std::strtol(s.c_str(), &end, 10);
    if (end == s.c_str() || *end) return cli_fail("--sweep-layers: '" + s + "' is not an integer");
    o.sweep_layers.push_back(int(v));
  }
  for (const std::string& s : split_commas(sweep_l2)) {
    char* end = nullptr;
    const double v = std::strtod(s.c_str(), &end);
    if (end == s.c_str() || *end || !(v > 0)) return cli_fail("--sweep-l2: '" + s + "' is not a positive number");
    o.sweep_l2.push_back(v);
  }
  if (o.sweep_layers.empty() != o.sweep_l2.empty()) return cli_fail("--sweep-layers and --sweep-l2 go together");
  auto lm = load_model(model);
  if (!lm.ok()) return cli_fail(lm.error());
  ThreadPool pool{int(threads)};
  if (lora) {
    if (loss != "mse" && loss != "bce" && loss != "pairwise")
      return cli_fail("--loss: '" + loss + "' is none of mse, bce, pairwise");
    lo.rank = int(rank);
    lo.alpha = float(alpha);
    lo.epochs = int(epochs);
    lo.batch = int(batch);
    lo.loss = loss == "mse"   ? prm::VerifyLoss::kSquaredError
              : loss == "bce" ? prm::VerifyLoss::kCrossEntropy
                              : prm::VerifyLoss::kPairwise;
    lo.optimizer.kind = sgd ? prm::OptimizerOptions::Kind::kSgd : prm::OptimizerOptions::Kind::kAdam;
    lo.optimizer.lr = lr;
    lo.average_decay = average;
    lo.kv_mem_bytes = o.sampling.kv_mem_bytes;
    lo.rollouts.n = int(mc_rollouts);
    lo.rollouts.max_tokens = int(sampling.max_tokens);
    lo.rollouts.temperature = float(sampling.temperature);
    lo.rollouts.seed = uint64_t(sampling.seed);
    lo.rollouts.kv_mem_bytes = o.sampling.kv_mem_bytes;
    if (!dump.empty())
      return cli_fail("--dump writes the probe fit's proposals: run fit-prm --dump without --lora, then --lora --steps");
    if (out == "prm_calibration.json") out = "prm_adapters.gguf";
    return fit_prm_lora_command(**lm, o, lo, out, pool);
  }
  auto rep = prm::fit_prm(**lm, o, pool, [](const std::string& line) { std::fprintf(stderr, "%s\n", line.c_str()); });
  if (!rep.ok()) return cli_fail(rep.error());
  if (Status st = prm::write_calibration(out, rep->record); !st.ok()) return cli_fail(st.error());
  if (!dump.empty()) {
    FILE* f = std::fopen(dump.c_str(), "w");
    if (!f) return cli_fail("--dump: cannot write '" + dump + "'");
    for (const auto& [name, set] : {std::pair{"train", &rep->train_set}, std::pair{"heldout", &rep->heldout_set}})
      for (const prm::LabelledStep& s : set->steps) {
        std::string text = s.proposal.text;  // a whole solution (--solutions) has several lines
        for (size_t at; (at = text.find('\n')) != std::string::npos;) text.replace(at, 1, "\\n");
        std::fprintf(f, "%s\t%zu\t%zu\t%d\t%s\t%s\n", name, s.problem, s.k, s.label, s.why.c_str(), text.c_str());
      }
    std::fclose(f);
  }
  const prm::CalibrationRecord& r = rep->record;
  std::printf("probe: layer %d, l2 %g, %d features; written to %s\n", r.probe->layer, r.probe->l2,
              r.probe->n_features(), out.c_str());
  const char* examples = o.solutions ? "solutions" : "steps";
  auto line = [&](const char* name, const prm::SplitFigures& f) {
    std::printf("%-9s %lld %s, %lld correct: probe AUROC %.4f (log-loss %.4f); answer log-odds AUROC %.4f\n", name,
                (long long)f.n_steps, examples, (long long)f.n_steps_correct, f.auroc, f.log_loss, f.logodds_auroc);
  };
  line("train:", rep->train);
  if (o.n_heldout > 0) {
    line("held-out:", rep->heldout);
    // Which mistakes the head sees: the correct steps against each kind of wrong step alone.
    std::printf("held-out AUROC by kind of error: %s\n", prm::auroc_by_error_text(rep->heldout).c_str());
  }
  return 0;
}

}  // namespace agentkv
