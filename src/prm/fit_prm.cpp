#include "prm/fit_prm.h"

#include <algorithm>
#include <chrono>

#include "prm/calibration_fit.h"

namespace agentkv::prm {
namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

struct SplitData {
  std::vector<float> x;
  std::vector<int> y;
  SplitFigures fig;
};

Result<SplitData> collect(const LoadedModel& lm, ArithSplit split, int n, const FitPrmOptions& opt,
                          const VerifyHead& head, ThreadPool& pool) {
  std::vector<ArithProblem> problems;
  for (int i = 0; i < n; ++i) problems.push_back(generate_arith_problem(arith_seed(split, uint64_t(i))));
  SplitData d;
  auto t0 = std::chrono::steady_clock::now();
  auto cands = sample_candidates(lm, problems, opt.sampling, pool);
  if (!cands.ok()) return make_error(cands.error());
  d.fig.seconds_sampling = seconds_since(t0);
  t0 = std::chrono::steady_clock::now();
  auto steps = kv_score_steps(lm, *cands, head, pool, opt.sampling.kv_mem_bytes);
  if (!steps.ok()) return make_error(steps.error());
  d.fig.seconds_scoring = seconds_since(t0);
  d.fig.n_problems = n;
  for (const ProblemCandidates& pc : *cands)
    for (const Candidate& c : pc.candidates) {
      ++d.fig.n_candidates;
      d.fig.n_answers_correct += c.check.answer_correct;
    }
  for (const ScoredStep& s : *steps) {
    d.x.push_back(s.logodds);
    d.y.push_back(s.label);
  }
  d.fig.n_steps = int64_t(d.x.size());
  d.fig.n_steps_correct = std::count(d.y.begin(), d.y.end(), 1);
  return d;
}

void evaluate(SplitData& d, const Calibration& c) {
  std::vector<double> s;
  for (float x : d.x) s.push_back(c.apply(x));
  d.fig.auroc = auroc(s, d.y);
  d.fig.log_loss = log_loss(c, d.x, d.y);
}

std::string describe(const char* name, const SplitFigures& f) {
  return std::string(name) + ": " + std::to_string(f.n_problems) + " problems, " + std::to_string(f.n_candidates) +
         " candidates (" + std::to_string(f.n_answers_correct) + " right answers), " + std::to_string(f.n_steps) +
         " steps (" + std::to_string(f.n_steps_correct) + " correct); sampling " +
         std::to_string(f.seconds_sampling) + " s, scoring " + std::to_string(f.seconds_scoring) + " s";
}

}  // namespace

Result<FitPrmReport> fit_prm(const LoadedModel& lm, const FitPrmOptions& opt, ThreadPool& pool,
                             const std::function<void(const std::string&)>& progress) {
  auto say = [&](const std::string& s) {
    if (progress) progress(s);
  };
  auto head = make_verify_head(*lm.tokenizer, opt.question, opt.pos, opt.neg);
  if (!head.ok()) return make_error(head.error());
  auto train = collect(lm, ArithSplit::kTrain, opt.n_train, opt, *head, pool);
  if (!train.ok()) return make_error(train.error());
  say(describe("train", train->fig));
  if (train->fig.n_steps_correct == 0 || train->fig.n_steps_correct == train->fig.n_steps)
    return make_error("fit-prm: the train steps are all of one label; sample more problems or raise --temperature");
  FitPrmReport rep;
  const Calibration cal = fit_logistic(train->x, train->y);
  evaluate(*train, cal);
  rep.train = train->fig;
  CalibrationRecord& r = rep.record;
  r.model_fingerprint = lm.fingerprint;
  r.model_name = lm.name;
  r.question = opt.question;
  r.pos_text = opt.pos;
  r.neg_text = opt.neg;
  r.pos_token = head->pos_token;
  r.neg_token = head->neg_token;
  r.calibration = cal;
  r.n_train_steps = train->fig.n_steps;
  r.n_train_positive = train->fig.n_steps_correct;
  r.train_auroc = train->fig.auroc;
  r.train_log_loss = train->fig.log_loss;
  if (opt.n_heldout > 0) {
    auto held = collect(lm, ArithSplit::kHeldOut, opt.n_heldout, opt, *head, pool);
    if (!held.ok()) return make_error(held.error());
    evaluate(*held, cal);
    rep.heldout = held->fig;
    say(describe("held-out", held->fig));
  }
  return rep;
}

}  // namespace agentkv::prm
