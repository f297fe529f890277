#include "lab/prm/fit_prm.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <optional>

#include "lab/prm/calibration_fit.h"
#include "lab/prm/solution_examples.h"
#include "util/monotonic_clock.h"

namespace agentkv::prm {
namespace {


struct SplitData {
  std::vector<float> features;  // [steps][d]
  std::vector<float> every_layer;  // [steps][n_layer][d] in a sweep
  std::vector<size_t> problem;  // per step
  std::vector<float> logodds;
  std::vector<int> y;
  std::vector<StepError> error;
  SplitFigures fig;
  StepSet set;
};

Result<SplitData> collect(const LoadedModel& lm, ArithSplit split, int n, const FitPrmOptions& opt,
                          const VerifyHead& head, ThreadPool& pool) {
  std::vector<ArithProblem> problems;
  for (int i = 0; i < n; ++i) problems.push_back(generate_arith_problem(arith_seed(split, uint64_t(i)), opt.shape));
  SplitData d;
  auto t0 = std::chrono::steady_clock::now();
  Result<StepSet> set = make_error("no examples");
  if (opt.solutions) {
    SampleOptions so;
    so.n_samples = opt.sampling.n;
    so.temperature = opt.sampling.temperature;
    so.max_tokens = opt.solution_max_tokens;
    so.seed = opt.sampling.seed;
    so.kv_mem_bytes = opt.sampling.kv_mem_bytes;
    auto cands = sample_candidates(lm, problems, so, pool);
    if (!cands.ok()) return make_error(cands.error());
    set = solution_set(lm, *cands);
    if (set.ok() && split == ArithSplit::kTrain && opt.reference_copies >= 0)
      AGENTKV_TRY(add_reference_solutions(*set, *lm.tokenizer, opt.reference_copies));
  } else {
    set = opt.steps_file.empty()
              ? sample_labelled_steps(lm, problems, opt.sampling, pool, opt.with_answers, opt.offered_answers)
              : read_step_dump(lm, opt.steps_file, split, n, opt.shape);
  }
  if (!set.ok()) return make_error(set.error());
  d.fig.seconds_sampling = seconds_since(t0);
  t0 = std::chrono::steady_clock::now();
  auto scores = kv_score_labelled(lm, *set, head, pool, opt.sampling.kv_mem_bytes);
  if (!scores.ok()) return make_error(scores.error());
  d.fig.seconds_scoring = seconds_since(t0);
  d.features = std::move(scores->features);
  d.every_layer = std::move(scores->every_layer);
  d.logodds = std::move(scores->logodds);
  for (const LabelledStep& s : set->steps) {
    d.y.push_back(s.label);
    d.problem.push_back(s.problem);
    d.error.push_back(s.error);
    ++d.fig.n_by_error[size_t(s.error)];
  }
  d.set = std::move(*set);
  d.fig.n_problems = n;
  d.fig.n_proposals = d.set.n_proposals;
  d.fig.n_offered = d.set.n_offered;
  d.fig.n_steps = int64_t(d.y.size());
  d.fig.n_steps_correct = std::count(d.y.begin(), d.y.end(), 1);
  return d;
}

double probe_log_loss(std::span<const double> z, std::span<const int> y) {
  double sum = 0;
  for (size_t i = 0; i < z.size(); ++i) {
    sum += softplus(y[i] ? -z[i] : z[i]);  // the example's loss
  }
  return z.empty() ? 0 : sum / double(z.size());
}

void evaluate(SplitData& d, const StepProbe& probe) {
  const std::vector<double> z = apply_probe(probe, d.features);
  d.fig.auroc = auroc(z, d.y);
  d.fig.auroc_by_error = auroc_by_error(z, d.y, d.error);
  d.fig.log_loss = probe_log_loss(z, d.y);
  const bool have_logodds = std::none_of(d.logodds.begin(), d.logodds.end(), [](float x) { return std::isnan(x); });
  const std::vector<double> x(d.logodds.begin(), d.logodds.end());
  d.fig.logodds_auroc = have_logodds ? auroc(x, d.y) : std::nan("");
}

// Features of one layer out of a sweep's [steps][n_layer][d].
std::vector<float> layer_slice(const SplitData& d, int layer, int n_layer, size_t dim) {
  std::vector<float> out;
  const size_t n = d.y.size();
  out.reserve(n * dim);
  for (size_t i = 0; i < n; ++i) {
    const float* f = d.every_layer.data() + (i * size_t(n_layer) + size_t(layer - 1)) * dim;
    out.insert(out.end(), f, f + dim);
  }
  return out;
}

// Mean AUROC over 4 folds that split by problem (steps of one problem are never on both sides).
double cross_validated_auroc(std::span<const float> x, const SplitData& d, int layer, double l2, size_t dim) {
  constexpr size_t kFolds = 4;
  double sum = 0;
  int counted = 0;
  for (size_t fold = 0; fold < kFolds; ++fold) {
    std::vector<float> tx, vx;
    std::vector<int> ty, vy;
    for (size_t i = 0; i < d.y.size(); ++i) {
      const bool val = d.problem[i] % kFolds == fold;
      (val ? vx : tx).insert((val ? vx : tx).end(), x.begin() + std::ptrdiff_t(i * dim),
                             x.begin() + std::ptrdiff_t((i + 1) * dim));
      (val ? vy : ty).push_back(d.y[i]);
    }
    if (ty.empty() || vy.empty()) continue;
    const double a = auroc(apply_probe(fit_step_probe(tx, ty, layer, l2), vx), vy);
    if (std::isnan(a)) continue;
    sum += a;
    ++counted;
  }
  return counted ? sum / counted : std::nan("");
}

// What every verifier file carries to name the model it was fitted on and the verify question.
template <class Record>
void name_model_and_question(Record& r, const LoadedModel& lm, const FitPrmOptions& opt) {
  r.model_fingerprint = lm.fingerprint;
  r.model_name = lm.name;
  r.question = opt.question;
  r.pos_text = opt.pos;
  r.neg_text = opt.neg;
}

std::string mean_and_sd_text(std::span<const float> x) {
  double sum = 0, sq = 0;
  for (float v : x) sum += v, sq += double(v) * v;
  const double n = double(std::max<size_t>(x.size(), 1)), mean = sum / n;
  char buf[96];
  std::snprintf(buf, sizeof buf, "mean %.3f, sd %.3f over %zu steps", mean, std::sqrt(std::max(0.0, sq / n - mean * mean)),
                x.size());
  return buf;
}

// The step beam's stop decisions (stop_role) scored by z: within a prefix (problem, k), the example that
// should win against the one that should not; go on before the reference's end, stop after it.
StopDecisions stop_decisions(const StepSet& set, std::span<const double> z) {
  size_t stride = 1;  // a prefix's key: problem * stride + k, with k <= the reference's steps
  for (const auto& lines : set.ref_lines) stride = std::max(stride, lines.size() + 1);
  StopDecisions out;
  for (const bool after_end : {false, true}) {
    std::vector<double> zd;
    std::vector<int> yd;
    std::vector<size_t> prefix;
    for (size_t i = 0; i < set.steps.size(); ++i) {
      const StopRole role = stop_role(set, set.steps[i]);
      const bool win = role == (after_end ? StopRole::kRightFinalAnswer : StopRole::kRightNextStep);
      if (!win && role != (after_end ? StopRole::kExtraStep : StopRole::kEarlyAnswer)) continue;
      zd.push_back(z[i]);
      yd.push_back(win ? 1 : 0);
      prefix.push_back(set.steps[i].problem * stride + set.steps[i].k);
    }
    (after_end ? out.stop_auroc : out.go_on_auroc) =
        within_group_auroc(zd, yd, prefix, after_end ? &out.n_stop_pairs : &out.n_go_on_pairs);
  }
  return out;
}

std::string describe(const char* name, const SplitFigures& f, bool solutions) {
  const std::string examples =
      solutions ? std::to_string(f.n_steps) + " sampled solutions (" + std::to_string(f.n_steps_correct) +
                      " with the right answer)"
                : std::to_string(f.n_proposals) + " proposed lines" +
                      (f.n_offered > 0 ? " (" + std::to_string(f.n_offered) + " answers offered)" : std::string()) + ", " +
                      std::to_string(f.n_steps) + " steps (" + std::to_string(f.n_steps_correct) + " correct)";
  return std::string(name) + ": " + std::to_string(f.n_problems) + " problems, " + examples + "; sampling " +
         std::to_string(f.seconds_sampling) + " s, scoring " + std::to_string(f.seconds_scoring) + " s";
}

Status check_example_source(const FitPrmOptions& opt, int mc_rollouts) {
  if (opt.with_answers && (opt.solutions || !opt.steps_file.empty()))
    return make_error("fit-prm: --answers samples step proposals with answer lines; not with --solutions or --steps "
                      "(a --steps file made with --answers holds them already)");
  if (opt.offered_answers && !opt.with_answers)
    return make_error("fit-prm: --offered-answers adds answer lines as examples; it needs --answers");
  if (opt.with_answers && mc_rollouts > 0)
    return make_error("fit-prm: --answers labels answer lines by the answer; --mc-rollouts values steps only");
  if (!opt.solutions && opt.reference_copies >= 0)
    return make_error("fit-prm: --references adds whole reference solutions; it needs --solutions");
  if (!opt.solutions) return {};
  if (!opt.steps_file.empty())
    return make_error("fit-prm: --solutions samples whole solutions; a --steps file holds one-line proposals");
  if (mc_rollouts > 0)
    return make_error("fit-prm: --mc-rollouts values steps; --solutions labels whole solutions by their answer");
  if (opt.solution_max_tokens < 1) return make_error("fit-prm: the solutions' --max-tokens must be positive");
  return {};
}

}  // namespace

std::array<double, kStepErrorKinds> auroc_by_error(std::span<const double> z, std::span<const int> y,
                                                   std::span<const StepError> error) {
  std::array<double, kStepErrorKinds> out;
  out.fill(std::nan(""));
  for (int kind = 1; kind < kStepErrorKinds; ++kind) {
    std::vector<double> zs;
    std::vector<int> ys;
    for (size_t i = 0; i < z.size(); ++i)
      if (y[i] == 1 || error[i] == StepError(kind)) zs.push_back(z[i]), ys.push_back(y[i]);
    const auto n_pos = std::count(ys.begin(), ys.end(), 1);
    if (n_pos > 0 && n_pos < std::ptrdiff_t(ys.size())) out[size_t(kind)] = auroc(zs, ys);
  }
  return out;
}

std::string auroc_by_error_text(const SplitFigures& f) {
  std::string out;
  char buf[96];
  for (int k = 1; k < kStepErrorKinds; ++k) {
    std::snprintf(buf, sizeof buf, "%s%s %.4f (%lld)", k > 1 ? " " : "", step_error_name(StepError(k)),
                  f.auroc_by_error[size_t(k)], (long long)f.n_by_error[size_t(k)]);
    out += buf;
  }
  return out;
}

Result<FitPrmReport> fit_prm(const LoadedModel& lm, const FitPrmOptions& opt, ThreadPool& pool,
                             const std::function<void(const std::string&)>& progress) {
  auto say = [&](const std::string& s) {
    if (progress) progress(s);
  };
  const int n_layer = lm.config().n_layer;
  const int layer = opt.feature_layer == 0 ? n_layer : opt.feature_layer;
  if (layer < 1 || layer > n_layer)
    return make_error("fit-prm: feature layer " + std::to_string(layer) + " is outside 1.." + std::to_string(n_layer));
  if (!(opt.l2 > 0)) return make_error("fit-prm: l2 must be positive");
  auto head = make_verify_head(*lm.tokenizer, opt.question, opt.pos, opt.neg);
  if (!head.ok()) return make_error(head.error());
  head->feature_layer = layer;
  head->read_logits = opt.with_logodds;
  for (int l : opt.sweep_layers)
    if (l < 1 || l > n_layer) return make_error("fit-prm: sweep layer " + std::to_string(l) + " is outside 1.." + std::to_string(n_layer));
  for (double c : opt.sweep_l2)
    if (!(c > 0)) return make_error("fit-prm: sweep l2 values must be positive");
  head->every_layer = !opt.sweep_layers.empty() && !opt.sweep_l2.empty();
  AGENTKV_TRY(check_example_source(opt, 0));
  auto train = collect(lm, ArithSplit::kTrain, opt.n_train, opt, *head, pool);
  if (!train.ok()) return make_error(train.error());
  say(describe("train", train->fig, opt.solutions));
  if (train->fig.n_steps_correct == 0 || train->fig.n_steps_correct == train->fig.n_steps)
    return make_error("fit-prm: the train steps are all of one label; sample more problems or raise --temperature");
  FitPrmReport rep;
  double l2 = opt.l2;
  int chosen = layer;
  const bool sweep = !opt.sweep_layers.empty() && !opt.sweep_l2.empty();
  if (sweep) {
    const size_t dim = size_t(lm.config().n_embd);
    double best = -1;
    for (int l : opt.sweep_layers) {
      const std::vector<float> x = layer_slice(*train, l, n_layer, dim);
      for (double c : opt.sweep_l2) {
        const double cv = cross_validated_auroc(x, *train, l, c, dim);
        say("sweep: layer " + std::to_string(l) + " l2 " + std::to_string(c) + ": 4-fold CV AUROC " +
            std::to_string(cv));
        if (cv > best) best = cv, chosen = l, l2 = c;
      }
    }
    say("chosen: layer " + std::to_string(chosen) + " l2 " + std::to_string(l2));
    train->features = layer_slice(*train, chosen, n_layer, dim);
  }
  const StepProbe probe = fit_step_probe(train->features, train->y, chosen, l2);
  evaluate(*train, probe);
  rep.train = train->fig;
  rep.train_set = std::move(train->set);
  CalibrationRecord& r = rep.record;
  name_model_and_question(r, lm, opt);
  r.pos_token = head->pos_token;
  r.neg_token = head->neg_token;
  if (opt.with_logodds) r.calibration = fit_logistic(train->logodds, train->y);
  r.probe = probe;
  r.n_train_steps = train->fig.n_steps;
  r.n_train_positive = train->fig.n_steps_correct;
  r.train_auroc = train->fig.auroc;
  r.train_log_loss = train->fig.log_loss;
  if (opt.n_heldout > 0) {
    auto held = collect(lm, ArithSplit::kHeldOut, opt.n_heldout, opt, *head, pool);
    if (!held.ok()) return make_error(held.error());
    if (sweep) held->features = layer_slice(*held, chosen, n_layer, size_t(lm.config().n_embd));
    evaluate(*held, probe);
    rep.heldout = held->fig;
    rep.heldout_set = std::move(held->set);
    r.heldout_auroc = held->fig.auroc;
    say(describe("held-out", held->fig, opt.solutions));
  }
  return rep;
}

Result<FitPrmLoraReport> fit_prm_lora(const LoadedModel& lm, const FitPrmOptions& opt, const FitLoraOptions& lora,
                                      ThreadPool& pool, const std::function<void(const std::string&)>& progress) {
  auto say = [&](const std::string& s) {
    if (progress) progress(s);
  };
  auto head = make_verify_head(*lm.tokenizer, opt.question, opt.pos, opt.neg);
  if (!head.ok()) return make_error(head.error());
  head->read_logits = true;  // the verify answer is the score; no probe features
  AGENTKV_TRY(check_example_source(opt, lora.rollouts.n));
  AGENTKV_TRY(check_fit_lora_options(lora));  // before any sampling
  auto train = collect(lm, ArithSplit::kTrain, opt.n_train, opt, *head, pool);
  if (!train.ok()) return make_error(train.error());
  say(describe("train", train->fig, opt.solutions));
  say("train base log-odds of the verify answer: " + mean_and_sd_text(train->logodds));
  FitPrmLoraReport rep;
  rep.adapters = LoraAdapters::create(lm.config(), lora.rank, lora.alpha, lora.seed);
  if (lora.rollouts.n > 0) {
    const auto t0 = std::chrono::steady_clock::now();
    auto values = rollout_step_values(lm, train->set, lora.rollouts, pool);
    if (!values.ok()) return make_error(values.error());
    rep.train_values = std::move(*values);
    rep.values_auroc = auroc(rep.train_values, train->y);
    say("Monte-Carlo step values (" + std::to_string(lora.rollouts.n) + " rollouts a step, " +
        std::to_string(seconds_since(t0)) + " s): AUROC against the checker's labels " +
        std::to_string(rep.values_auroc));
  }
  // The verifier with `ad` on: its AUROC on a split's steps, scored as serving scores them, into
  // fig's auroc and within_auroc (and, with answer lines, the steps-only pair).
  auto adapted_figures = [&](const SplitData& d, const LoraAdapters& ad, SplitFigures& fig) -> Status {
    VerifyHead adapted = *head;
    adapted.adapters = std::make_shared<LoraAdapters>(ad);
    auto scores = kv_score_labelled(lm, d.set, adapted, pool, opt.sampling.kv_mem_bytes);
    if (!scores.ok()) return make_error(scores.error());
    const std::vector<double> z(scores->logodds.begin(), scores->logodds.end());
    fig.auroc = auroc(z, d.y);
    fig.within_auroc = within_group_auroc(z, d.y, d.problem);
    if (!d.set.with_answers) return Status::ok_status();
    std::vector<double> zs;
    std::vector<int> ys;
    std::vector<size_t> ps;
    for (size_t i = 0; i < d.set.steps.size(); ++i) {
      if (!is_step_before_end(d.set, d.set.steps[i])) continue;
      zs.push_back(z[i]);
      ys.push_back(d.y[i]);
      ps.push_back(d.problem[i]);
    }
    fig.n_steps_before_end = int64_t(ys.size());
    fig.n_steps_before_end_correct = std::count(ys.begin(), ys.end(), 1);
    fig.steps_auroc = auroc(zs, ys);
    fig.steps_within_auroc = within_group_auroc(zs, ys, ps);
    fig.stops = stop_decisions(d.set, z);
    return Status::ok_status();
  };
  std::optional<SplitData> held;
  if (opt.n_heldout > 0) {
    auto h = collect(lm, ArithSplit::kHeldOut, opt.n_heldout, opt, *head, pool);
    if (!h.ok()) return make_error(h.error());
    held = std::move(*h);
  }
  FitLoraOptions lo = lora;
  // The held-out figures; the adapted ones are those of the last epoch's adapters.
  SplitFigures held_last = held ? held->fig : SplitFigures{};
  if (held)
    lo.after_epoch = [&](const LoraAdapters& ad) -> Result<double> {
      AGENTKV_TRY(adapted_figures(*held, ad, held_last));
      return held_last.auroc;
    };
  auto fit = fit_lora_adapters(lm, train->set, rep.train_values, *head, rep.adapters, lo, pool, progress);
  if (!fit.ok()) return make_error(fit.error());
  rep.fit = *fit;
  rep.train = train->fig;
  const std::vector<double> train_base(train->logodds.begin(), train->logodds.end());
  rep.train.logodds_auroc = auroc(train_base, train->y);
  rep.train.logodds_within_auroc = within_group_auroc(train_base, train->y, train->problem, &rep.train.n_within_pairs);
  rep.train.logodds_stops = stop_decisions(train->set, train_base);
  AGENTKV_TRY(adapted_figures(*train, rep.adapters, rep.train));
  AdapterRecord& r = rep.record;
  name_model_and_question(r, lm, opt);
  r.n_train_examples = fit->n_examples;
  if (held) {
    if (fit->epoch_after.empty()) AGENTKV_TRY(adapted_figures(*held, rep.adapters, held_last));
    rep.heldout = held_last;
    const std::vector<double> base(held->logodds.begin(), held->logodds.end());
    rep.heldout.logodds_auroc = auroc(base, held->y);
    rep.heldout.logodds_within_auroc = within_group_auroc(base, held->y, held->problem, &rep.heldout.n_within_pairs);
    rep.heldout.logodds_stops = stop_decisions(held->set, base);
    r.heldout_auroc = rep.heldout.auroc;
    say(describe("held-out", held->fig, opt.solutions));
  }
  return rep;
}

}  // namespace agentkv::prm
