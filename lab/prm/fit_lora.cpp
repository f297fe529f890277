#include "lab/prm/fit_lora.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <string>

#include "lab/prm/calibration_fit.h"

namespace agentkv::prm {

std::vector<size_t> plan_batches(std::vector<size_t>& order, std::span<const size_t> problem_of, int batch,
                                 bool by_problem) {
  std::vector<size_t> starts;
  if (!by_problem) {
    for (size_t j = 0; j < order.size(); j += size_t(std::max(batch, 1))) starts.push_back(j);
    return starts;
  }
  // Stable: each problem's examples keep their shuffled order, problems come in the order in which
  // the shuffle first met them.
  std::map<size_t, size_t> first_seen;  // problem -> first position in order
  for (size_t j = 0; j < order.size(); ++j) first_seen.try_emplace(problem_of[order[j]], j);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return first_seen[problem_of[a]] < first_seen[problem_of[b]]; });
  for (size_t j = 0; j < order.size(); ++j)
    if (j == 0 || problem_of[order[j]] != problem_of[order[j - 1]]) starts.push_back(j);
  return starts;
}

Status check_fit_lora_options(const FitLoraOptions& opt) {
  if (opt.rank < 1 || !(opt.alpha > 0)) return make_error("fit-prm --lora: rank and alpha must be positive");
  if (opt.epochs < 1 || opt.batch < 1) return make_error("fit-prm --lora: epochs and batch must be >= 1");
  if (!(opt.average_decay >= 0 && opt.average_decay < 1))
    return make_error("fit-prm --lora: the average's decay must be in [0, 1), not " + std::to_string(opt.average_decay));
  if (!(opt.keep_contexts_share >= 0 && opt.keep_contexts_share <= 1))
    return make_error("fit-prm --lora: the share of the KV budget for kept contexts must be in [0, 1]");
  return {};
}

Result<LoraFitFigures> fit_lora_adapters(const LoadedModel& lm, const StepSet& set, std::span<const double> targets,
                                         const VerifyHead& head, LoraAdapters& adapters, const FitLoraOptions& opt,
                                         ThreadPool& pool, const std::function<void(const std::string&)>& progress) {
  AGENTKV_TRY(check_fit_lora_options(opt));
  if (set.steps.empty()) return make_error("fit-prm --lora: no labelled steps to train on");
  if (!targets.empty() && targets.size() != set.steps.size())
    return make_error("fit-prm --lora: " + std::to_string(targets.size()) + " targets for " +
                      std::to_string(set.steps.size()) + " steps");
  auto target = [&](size_t i) { return targets.empty() ? double(set.steps[i].label) : targets[i]; };
  KvManagerOptions ko;
  ko.mem_bytes = opt.kv_mem_bytes;
  ko.prefix_caching = false;
  auto kv = KvManager::create(lm.config(), lm.fingerprint, ko);
  if (!kv.ok()) return make_error(kv.error());
  LoraFitFigures fig;
  OptimizerState state;
  // The averaged adapters (average_decay > 0), started at the initial iterate.
  const bool averaging = opt.average_decay > 0;
  std::vector<float> avg;
  if (averaging) avg.assign(adapters.params().begin(), adapters.params().end());
  const float d = float(opt.average_decay);
  uint64_t shuffle = opt.seed;
  // The train contexts of the first epoch's groups are kept for the later epochs while they take at
  // most keep_contexts_share of the KV budget (the rest builds the groups not kept, every epoch): the
  // same contexts in the same order, so the fit is the same bit for bit, without prefilling them again.
  struct KeptGroup {
    std::vector<VerifyContext> ready;
    std::vector<size_t> steps;
  };
  std::vector<KeptGroup> kept;
  size_t kept_problems = 0;  // the groups kept cover problems [0, kept_problems)
  bool keeping = opt.epochs > 1 && opt.keep_contexts_share > 0;
  for (int epoch = 0; epoch < opt.epochs; ++epoch) {
    double loss_sum = 0;
    int64_t n = 0;
    std::vector<double> p_pos;
    std::vector<int> labels;
    auto train_group = [&](std::span<const VerifyContext> ready, std::span<const size_t> steps) -> Status {
      // A fixed shuffle of the group's examples, so batches mix problems and labels (or, by
      // problem, a shuffle of the problems, each one batch).
      std::vector<size_t> order(steps.size());
      for (size_t i = 0; i < order.size(); ++i) order[i] = i;
      for (size_t i = order.size(); i > 1; --i) {
        shuffle = shuffle * 6364136223846793005ull + 1442695040888963407ull;
        std::swap(order[i - 1], order[size_t(shuffle >> 33) % i]);
      }
      std::vector<size_t> problem_of(order.size());
      for (size_t j = 0; j < order.size(); ++j) problem_of[j] = set.steps[steps[j]].problem;
      const std::vector<size_t> batch_starts = plan_batches(order, problem_of, opt.batch, opt.batch_by_problem);
      for (size_t bi = 0; bi < batch_starts.size(); ++bi) {
        const size_t b0 = batch_starts[bi], b1 = bi + 1 < batch_starts.size() ? batch_starts[bi + 1] : order.size();
        std::vector<VerifyExample> batch;
        for (size_t j = b0; j < b1; ++j) {
          batch.push_back(VerifyExample{&ready[order[j]], target(steps[order[j]])});
          labels.push_back(set.steps[steps[order[j]]].label);
        }
        auto r = train_step(*lm.model, batch, head, adapters, opt.loss, opt.optimizer, state, pool);
        if (!r.ok()) return r.status_error();
        if (averaging) {
          std::span<const float> now = adapters.params();
          for (size_t k = 0; k < avg.size(); ++k) avg[k] = d * avg[k] + (1.0f - d) * now[k];
        }
        loss_sum += r->mean_loss * double(batch.size());
        p_pos.insert(p_pos.end(), r->p_pos.begin(), r->p_pos.end());
        n += int64_t(batch.size());
      }
      return {};
    };
    for (const KeptGroup& g : kept) AGENTKV_TRY(train_group(g.ready, g.steps));
    if (kept_problems < set.problems.size())
      AGENTKV_TRY(for_each_step_group(
          lm, **kv, set, RowOutputs{}, pool,
          [&](std::span<const KvSequence* const> contexts, std::span<const size_t> steps) -> Status {
            auto ready = prepare_verify_contexts(*lm.model, **kv, contexts, head, pool);
            if (!ready.ok()) return ready.status_error();
            AGENTKV_TRY(train_group(*ready, steps));
            if (epoch == 0 && keeping) {
              keeping = double((*kv)->used_bytes()) <= opt.keep_contexts_share * double((*kv)->budget_bytes());
              if (keeping) {
                kept.push_back(KeptGroup{std::move(*ready), std::vector<size_t>(steps.begin(), steps.end())});
                const size_t g0 = set.steps[steps.front()].problem / kStepGroupProblems * kStepGroupProblems;
                kept_problems = std::min(set.problems.size(), g0 + kStepGroupProblems);
              }
            }
            return {};
          },
          kept_problems));
    fig.kept_problems = kept_problems;
    if (epoch == 0 && progress && opt.epochs > 1)
      progress("lora: the contexts of " + std::to_string(kept_problems) + " of " + std::to_string(set.problems.size()) +
               " train problems kept for the later epochs (" + std::to_string((*kv)->used_bytes() >> 20) + " MiB of a " +
               std::to_string((*kv)->budget_bytes() >> 20) + " MiB KV budget)");
    fig.epoch_loss.push_back(n ? loss_sum / double(n) : 0.0);
    fig.epoch_auroc.push_back(auroc(p_pos, labels));
    fig.n_examples = n;
    if (opt.after_epoch) {
      // Scored as they would be written: the average when averaging.
      auto v = [&]() -> Result<double> {
        if (!averaging) return opt.after_epoch(adapters);
        LoraAdapters averaged = adapters;
        std::copy(avg.begin(), avg.end(), averaged.params().begin());
        return opt.after_epoch(averaged);
      }();
      if (!v.ok()) return make_error(v.error());
      fig.epoch_after.push_back(*v);
    }
    if (progress) {
      char line[160];
      int len = std::snprintf(line, sizeof line, "lora epoch %d: %lld examples, mean loss %.5f, train AUROC %.4f",
                              epoch + 1, (long long)n, fig.epoch_loss.back(), fig.epoch_auroc.back());
      if (opt.after_epoch && len > 0 && size_t(len) < sizeof line)
        std::snprintf(line + len, sizeof line - size_t(len), ", held-out AUROC %.4f", fig.epoch_after.back());
      progress(line);
    }
  }
  if (averaging) std::copy(avg.begin(), avg.end(), adapters.params().begin());
  return fig;
}

}  // namespace agentkv::prm
