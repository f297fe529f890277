#include <cstdio>

#include "cli/arg_parser.h"
#include "cli/commands.h"
#include "cli/policy_sampling_args.h"
#include "prm/fit_prm.h"

namespace agentkv {

int cmd_fit_prm(int argc, char** argv) {
  std::string model = "smollm2", out = "prm_calibration.json";
  prm::FitPrmOptions o;
  int64_t n_train = o.n_train, n_heldout = o.n_heldout, threads = 0;
  PolicySamplingArgs sampling;
  ArgParser p("fit-prm",
              "Samples solutions to generated arithmetic problems, labels each step with the exact checker, scores "
              "the steps with the KV-PRM and fits the verify head's calibration (logistic regression on the "
              "log-odds of the two answer tokens). Writes the calibration with the model's fingerprint.");
  p.add_string("-m,--model", &model, "model alias (smollm2, gemma3) or .gguf path");
  p.add_string("-o,--out", &out, "calibration file to write (JSON)");
  p.add_int("--train", &n_train, "train problems", 1, 100000);
  p.add_int("--heldout", &n_heldout, "held-out problems to report the AUROC on (0: none)", 0, 100000);
  sampling.declare(p);
  p.add_string("--question", &o.question, "the verify question asked after each step");
  p.add_string("--pos", &o.pos, "answer token meaning 'correct'");
  p.add_string("--neg", &o.neg, "answer token meaning 'wrong'");
  p.add_int("-t,--threads", &threads, "threads (0 = all cores)", 0, 1024);
  if (auto rc = p.parse_command(argc, argv)) return *rc;
  o.n_train = int(n_train);
  o.n_heldout = int(n_heldout);
  o.sampling = sampling.options();
  auto lm = load_model(model);
  if (!lm.ok()) return cli_fail(lm.error());
  ThreadPool pool{int(threads)};
  auto rep = prm::fit_prm(**lm, o, pool, [](const std::string& line) {
    std::fprintf(stderr, "%s\n", line.c_str());
  });
  if (!rep.ok()) return cli_fail(rep.error());
  if (Status st = prm::write_calibration(out, rep->record); !st.ok()) return cli_fail(st.error());
  const prm::CalibrationRecord& r = rep->record;
  std::printf("calibration: a = %.6f, b = %.6f (written to %s)\n", r.calibration.a, r.calibration.b, out.c_str());
  std::printf("train:    %lld steps, %lld correct, AUROC %.4f, log-loss %.4f\n", (long long)rep->train.n_steps,
              (long long)rep->train.n_steps_correct, rep->train.auroc, rep->train.log_loss);
  if (o.n_heldout > 0)
    std::printf("held-out: %lld steps, %lld correct, AUROC %.4f, log-loss %.4f\n", (long long)rep->heldout.n_steps,
                (long long)rep->heldout.n_steps_correct, rep->heldout.auroc, rep->heldout.log_loss);
  return 0;
}

}  // namespace agentkv
