#include "lab/prm/best_of_n.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <map>

#include "prm/kv_scorer.h"
#include "lab/prm/solution_examples.h"
#include "lab/prm/trajectory.h"

namespace agentkv::prm {
namespace {

constexpr double kNoScore = -std::numeric_limits<double>::infinity();

// The text PRM's own cache: it re-encodes every trajectory, so nothing is shared or kept.
Result<std::unique_ptr<KvManager>> text_prm_scratch(const LoadedModel& lm) {
  KvManagerOptions ko;
  ko.prefix_caching = false;
  ko.mem_bytes = int64_t(256) << 20;
  return KvManager::create(lm.config(), lm.fingerprint, ko);
}

// Per problem, per candidate: min over its steps of the calibrated score.
Result<std::vector<std::vector<double>>> prm_solution_scores(const LoadedModel& lm,
                                                             std::span<const ProblemCandidates> problems,
                                                             bool via_kv, const VerifyHead& head, ThreadPool& pool) {
  std::vector<std::vector<double>> out(problems.size());
  for (size_t p = 0; p < problems.size(); ++p) out[p].assign(problems[p].candidates.size(), kNoScore);
  auto fold = [&](size_t p, size_t c, double s) {
    double& v = out[p][c];
    v = v == kNoScore ? s : std::min(v, s);
  };
  if (via_kv) {
    auto steps = kv_score_steps(lm, problems, head, pool);
    if (!steps.ok()) return make_error(steps.error());
    for (const ScoredStep& s : *steps) fold(s.problem, s.candidate, s.score);
    return out;
  }
  auto kv = text_prm_scratch(lm);
  if (!kv.ok()) return make_error(kv.error());
  for (size_t p = 0; p < problems.size(); ++p) {
    const ProblemCandidates& pc = problems[p];
    for (size_t c = 0; c < pc.candidates.size(); ++c) {
      const Candidate& cand = pc.candidates[c];
      std::vector<std::vector<int32_t>> texts;
      for (size_t line : cand.check.step_line) texts.push_back(concat_prefix(pc.prompt, cand.lines, line + 1));
      if (texts.empty()) continue;
      auto scores = text_prm_score(*lm.model, **kv, texts, head, pool);
      if (!scores.ok()) return make_error(scores.error());
      for (double s : scores->score) fold(p, c, s);
    }
  }
  return out;
}

// Per problem, per candidate: the head's score of one verify token after the whole solution.
Result<std::vector<std::vector<double>>> prm_whole_solution_scores(const LoadedModel& lm,
                                                                   std::span<const ProblemCandidates> problems,
                                                                   bool via_kv, const VerifyHead& head,
                                                                   ThreadPool& pool) {
  std::vector<std::vector<double>> out(problems.size());
  if (via_kv) {
    auto set = solution_set(lm, problems);
    if (!set.ok()) return make_error(set.error());
    auto scores = kv_score_labelled(lm, *set, head, pool);
    if (!scores.ok()) return make_error(scores.error());
    for (size_t i = 0; i < set->steps.size(); ++i) out[set->steps[i].problem].push_back(scores->score[i]);
    return out;
  }
  auto kv = text_prm_scratch(lm);
  if (!kv.ok()) return make_error(kv.error());
  for (size_t p = 0; p < problems.size(); ++p) {
    const ProblemCandidates& pc = problems[p];
    std::vector<std::vector<int32_t>> texts;
    for (const Candidate& c : pc.candidates) {
      texts.push_back(pc.prompt);
      const std::vector<int32_t> sol = solution_tokens(*lm.tokenizer, c);
      texts.back().insert(texts.back().end(), sol.begin(), sol.end());
    }
    if (texts.empty()) continue;
    auto scores = text_prm_score(*lm.model, **kv, texts, head, pool);
    if (!scores.ok()) return make_error(scores.error());
    out[p] = scores->score;
  }
  return out;
}

size_t argmax(const std::vector<double>& v) {
  size_t best = 0;
  for (size_t i = 1; i < v.size(); ++i)
    if (v[i] > v[best]) best = i;
  return best;
}

}  // namespace

Result<BestOfNScorer> parse_best_of_n_scorer(const std::string& name) {
  if (name == "kvprm") return BestOfNScorer::kKvPrm;
  if (name == "textprm") return BestOfNScorer::kTextPrm;
  if (name == "logprob") return BestOfNScorer::kLogprob;
  if (name == "vote") return BestOfNScorer::kVote;
  if (name == "kvprm-vote") return BestOfNScorer::kKvPrmVote;
  return make_error("unknown scorer '" + name + "' (kvprm, textprm, logprob, vote, kvprm-vote)");
}

std::vector<double> weighted_vote(std::span<const Candidate> cands, std::span<const double> prm_scores) {
  AGENTKV_CHECK(cands.size() == prm_scores.size());
  std::map<int64_t, double> weight;
  for (size_t c = 0; c < cands.size(); ++c)
    if (cands[c].check.final_answer && prm_scores[c] != kNoScore)
      weight[*cands[c].check.final_answer] += 1.0 / (1.0 + std::exp(-prm_scores[c]));
  std::vector<double> out;
  for (const Candidate& c : cands) out.push_back(c.check.final_answer ? weight[*c.check.final_answer] : kNoScore);
  return out;
}

Result<PrmScoreAt> parse_prm_score_at(const std::string& name) {
  if (name == "steps") return PrmScoreAt::kWeakestStep;
  if (name == "solution") return PrmScoreAt::kWholeSolution;
  return make_error("unknown place to score at '" + name + "' (steps, solution)");
}

Result<BestOfNResult> best_of_n(const LoadedModel& lm, std::span<const ProblemCandidates> problems,
                                BestOfNScorer scorer, const VerifyHead& head, ThreadPool& pool, PrmScoreAt at) {
  BestOfNResult r;
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<std::vector<double>> scores(problems.size());
  if (scorer == BestOfNScorer::kKvPrm || scorer == BestOfNScorer::kTextPrm || scorer == BestOfNScorer::kKvPrmVote) {
    const bool via_kv = scorer != BestOfNScorer::kTextPrm;
    auto s = at == PrmScoreAt::kWholeSolution ? prm_whole_solution_scores(lm, problems, via_kv, head, pool)
                                              : prm_solution_scores(lm, problems, via_kv, head, pool);
    if (!s.ok()) return make_error(s.error());
    scores = std::move(*s);
    if (scorer == BestOfNScorer::kKvPrmVote)
      for (size_t p = 0; p < problems.size(); ++p) scores[p] = weighted_vote(problems[p].candidates, scores[p]);
  } else {
    for (size_t p = 0; p < problems.size(); ++p) {
      std::map<int64_t, int> votes;
      for (const Candidate& c : problems[p].candidates)
        if (c.check.final_answer) ++votes[*c.check.final_answer];
      for (const Candidate& c : problems[p].candidates) {
        if (scorer == BestOfNScorer::kLogprob)
          scores[p].push_back(c.tokens.empty() ? kNoScore : c.logprob / double(c.tokens.size()));
        else
          scores[p].push_back(c.check.final_answer ? double(votes[*c.check.final_answer]) : kNoScore);
      }
    }
  }
  r.seconds_scoring = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  for (size_t p = 0; p < problems.size(); ++p) {
    const auto& cands = problems[p].candidates;
    if (cands.empty()) continue;
    ++r.n_problems;
    const size_t best = argmax(scores[p]);
    r.chosen.push_back(best);
    r.n_correct += cands[best].check.answer_correct;
    r.correct.push_back(cands[best].check.answer_correct);
    const SolutionCheck& chosen = cands[best].check;
    r.n_chosen_steps_right += !chosen.steps.empty() && chosen.all_steps_correct;
    r.n_chosen_no_step += chosen.steps.empty();
    r.n_oracle += std::any_of(cands.begin(), cands.end(), [](const Candidate& c) { return c.check.answer_correct; });
  }
  return r;
}

}  // namespace agentkv::prm
