#include "lab/prm/step_beam.h"

#include <algorithm>
#include <chrono>
#include <limits>
#include <memory>
#include <string>

#include "lab/prm/arith_prompt.h"
#include "prm/kv_scorer.h"
#include "kv/direct_prefill.h"
#include "lab/prm/step_checker.h"
#include "util/monotonic_clock.h"

namespace agentkv::prm {
namespace {

constexpr double kBeamNoScore = -std::numeric_limits<double>::infinity();

struct Beam {
  std::vector<int32_t> tokens;     // prompt + lines
  std::vector<std::string> lines;  // text, without newlines
  double score = 0;                // min step score (PRM) or summed log-probability
  bool done = false;
  KvSequence ctx;                  // its cache (KV-PRM only)
};

struct BeamCandidate {
  size_t problem = 0, parent = 0;
  StepProposal line;
  double score = kBeamNoScore;
  bool done = false;
};

// With offer_answer: each live beam that ends in a step gets the policy's greedy answer as a
// finishing candidate, appended to cands (counted in policy_lines).
Status offer_answers(StepProposer& answerer, const std::vector<std::vector<Beam>>& beams,
                     std::span<const std::vector<int32_t>> contexts, std::span<const std::pair<size_t, size_t>> owner,
                     std::vector<BeamCandidate>& cands, int64_t& policy_lines) {
  std::vector<std::vector<int32_t>> answer_contexts;
  std::vector<size_t> answer_owner;  // index into contexts / owner
  for (size_t c = 0; c < contexts.size(); ++c) {
    const Beam& b = beams[owner[c].first][owner[c].second];
    if (b.lines.empty() || !is_step_line(b.lines.back())) continue;
    answer_contexts.push_back(contexts[c]);
    answer_owner.push_back(c);
  }
  if (answer_contexts.empty()) return {};
  auto answers = answerer.answer_lines(answer_contexts);
  if (!answers.ok()) return answers.status_error();
  for (size_t j = 0; j < answer_owner.size(); ++j) {
    ++policy_lines;
    cands.push_back(BeamCandidate{owner[answer_owner[j]].first, owner[answer_owner[j]].second, std::move((*answers)[j]),
                                  kBeamNoScore, true});
  }
  return {};
}

}  // namespace

Result<BeamScorer> parse_beam_scorer(const std::string& name) {
  if (name == "kvprm") return BeamScorer::kKvPrm;
  if (name == "textprm") return BeamScorer::kTextPrm;
  if (name == "logprob") return BeamScorer::kLogprob;
  return make_error("scorer '" + name + "' cannot rank steps (kvprm, textprm, logprob)");
}

Result<BeamResult> step_beam_search(const LoadedModel& lm, std::span<const ArithProblem> problems, BeamScorer scorer,
                                    const VerifyHead& head, const BeamOptions& opt, ThreadPool& pool) {
  if (opt.width < 1 || opt.sampling.n < 1 || opt.max_steps < 1)
    return make_error("beam search: width, proposals per beam and max steps must be positive");
  const auto t_start = std::chrono::steady_clock::now();
  const Tokenizer& tok = *lm.tokenizer;
  const bool via_kv = scorer == BeamScorer::kKvPrm;
  // The beams' caches live in their own budget: a failure to prefill names it.
  const auto prefill_failed = [&](const Status& st) {
    return make_error("beam search: " + st.error() + " (the beams' caches have a KV budget of " +
                      std::to_string(opt.kv_mem_bytes >> 20) + " MiB: raise --kv-mem)");
  };
  KvManagerOptions ko;
  ko.mem_bytes = opt.kv_mem_bytes;
  ko.prefix_caching = false;  // the text PRM must re-encode; the KV-PRM forks instead of looking up
  auto kv = KvManager::create(lm.config(), lm.fingerprint, ko);
  if (!kv.ok()) return make_error(kv.error());
  auto proposer = StepProposer::create(lm, opt.sampling, pool);
  if (!proposer.ok()) return make_error(proposer.error());
  // The finishing candidates: one greedy line after "Answer:" (a PRM scorer only: log-probability has
  // no view of whether the steps so far are done).
  const bool offer_answer = opt.offer_answer && scorer != BeamScorer::kLogprob;
  std::unique_ptr<StepProposer> answerer;
  if (offer_answer) {
    auto a = create_answerer(lm, opt.sampling, pool);
    if (!a.ok()) return make_error(a.error());
    answerer = std::move(*a);
  }
  BeamResult r;
  std::vector<std::vector<Beam>> beams(problems.size());
  for (size_t p = 0; p < problems.size(); ++p) {
    auto text = arith_policy_prompt(tok, problems[p]);
    if (!text.ok()) return make_error(text.error());
    beams[p].push_back(Beam{tok.encode(*text, tok.add_bos_default(), true), {}, 0, false, KvSequence(**kv)});
  }
  if (via_kv) {  // the policy agents' caches: each problem's prompt, prefilled once, all in one pass
    std::vector<KvSequence*> seqs;
    std::vector<std::span<const int32_t>> toks;
    for (auto& b : beams) seqs.push_back(&b[0].ctx), toks.push_back(b[0].tokens);
    if (Status st = prefill_together(*lm.model, **kv, seqs, toks, pool); !st.ok()) return prefill_failed(st);
  }
  double scoring = 0;
  for (int round = 0; round < opt.max_steps; ++round) {
    std::vector<std::vector<int32_t>> contexts;
    std::vector<std::pair<size_t, size_t>> owner;
    for (size_t p = 0; p < beams.size(); ++p)
      for (size_t b = 0; b < beams[p].size(); ++b)
        if (!beams[p][b].done) contexts.push_back(beams[p][b].tokens), owner.emplace_back(p, b);
    if (contexts.empty()) break;
    auto props = (*proposer)->propose(contexts);
    if (!props.ok()) return make_error(props.error());
    std::vector<BeamCandidate> cands;
    for (size_t c = 0; c < contexts.size(); ++c)
      for (StepProposal& prop : (*props)[c]) {
        ++r.policy_lines;
        BeamCandidate cand{owner[c].first, owner[c].second, std::move(prop)};
        cand.done = cand.line.ended || is_answer_line(cand.line.text);
        cands.push_back(std::move(cand));
      }
    if (offer_answer)
      AGENTKV_TRY(offer_answers(*answerer, beams, contexts, owner, cands, r.policy_lines));
    // Which candidates the verifier rates: step lines (and, with offer_answer, answer lines after a
    // step). An unrated answer line ends the beam with the score its steps earned; any other line is
    // off format and ranks last.
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<size_t> rated;
    for (size_t i = 0; i < cands.size(); ++i) {
      BeamCandidate& c = cands[i];
      const Beam& parent = beams[c.problem][c.parent];
      if (scorer == BeamScorer::kLogprob) {
        c.score = parent.score + c.line.logprob;
      } else if (is_step_line(c.line.text) ||
                 (offer_answer && is_answer_line(c.line.text) && !parent.lines.empty())) {
        rated.push_back(i);  // with offer_answer the verifier rates answer lines too: it decides the stop
      } else {
        c.score = is_answer_line(c.line.text) && !parent.lines.empty() ? parent.score : kBeamNoScore;
      }
    }
    std::vector<KvSequence> forks;  // candidates' caches (KV-PRM), indexed like `rated`
    if (!rated.empty()) {
      Result<PrmScores> s = make_error("unset");
      if (via_kv) {
        forks.reserve(rated.size());
        std::vector<KvSequence*> ptrs;
        std::vector<std::span<const int32_t>> toks;
        for (size_t i : rated) {
          forks.push_back(beams[cands[i].problem][cands[i].parent].ctx.fork());
          ptrs.push_back(&forks.back());
          toks.push_back(cands[i].line.tokens);
        }
        if (Status st = prefill_together(*lm.model, **kv, ptrs, toks, pool); !st.ok()) return prefill_failed(st);
        const std::vector<const KvSequence*> scored(ptrs.begin(), ptrs.end());
        s = kv_prm_score(*lm.model, **kv, scored, head, pool);  // every agent's candidates, one forward
      } else {
        std::vector<std::vector<int32_t>> texts;
        for (size_t i : rated) {
          texts.push_back(beams[cands[i].problem][cands[i].parent].tokens);
          texts.back().insert(texts.back().end(), cands[i].line.tokens.begin(), cands[i].line.tokens.end());
        }
        s = text_prm_score(*lm.model, **kv, texts, head, pool);
      }
      if (!s.ok()) return make_error(s.error());
      for (size_t j = 0; j < rated.size(); ++j) {
        BeamCandidate& c = cands[rated[j]];
        const Beam& parent = beams[c.problem][c.parent];
        c.score = parent.lines.empty() ? s->score[j] : std::min(parent.score, s->score[j]);
      }
      r.scored_candidates += int64_t(rated.size());
    }
    scoring += seconds_since(t0);
    // Survivors per problem: finished beams compete with the new candidates.
    std::vector<std::vector<Beam>> next(problems.size());
    std::vector<std::vector<std::pair<double, long>>> pool_of(problems.size());  // (score, -1 - beam | cand)
    for (size_t p = 0; p < beams.size(); ++p)
      for (size_t b = 0; b < beams[p].size(); ++b)
        if (beams[p][b].done) pool_of[p].emplace_back(beams[p][b].score, -1 - long(b));
    for (size_t i = 0; i < cands.size(); ++i) pool_of[cands[i].problem].emplace_back(cands[i].score, long(i));
    std::vector<long> fork_of(cands.size(), -1);
    for (size_t j = 0; j < rated.size() && via_kv; ++j) fork_of[rated[j]] = long(j);
    for (size_t p = 0; p < problems.size(); ++p) {
      auto& pl = pool_of[p];
      // Ties keep finished solutions first (a weakest-step score cannot rise with more steps, so an
      // open beam that ties a finished one has only added steps the verifier likes no less), then
      // earlier ones (stable).
      const auto finished = [&](long k) { return k < 0 || cands[size_t(k)].done; };
      std::stable_sort(pl.begin(), pl.end(), [&](const auto& a, const auto& b) {
        if (a.first != b.first) return a.first > b.first;
        return finished(a.second) && !finished(b.second);
      });
      for (size_t k = 0; k < pl.size() && next[p].size() < size_t(opt.width); ++k) {
        if (pl[k].second < 0) {
          next[p].push_back(std::move(beams[p][size_t(-1 - pl[k].second)]));
          continue;
        }
        BeamCandidate& c = cands[size_t(pl[k].second)];
        const Beam& parent = beams[p][c.parent];
        Beam nb{parent.tokens, parent.lines, c.score, c.done, KvSequence(**kv)};
        nb.tokens.insert(nb.tokens.end(), c.line.tokens.begin(), c.line.tokens.end());
        nb.lines.push_back(c.line.text);
        if (fork_of[size_t(pl[k].second)] >= 0) {
          nb.ctx = std::move(forks[size_t(fork_of[size_t(pl[k].second)])]);
        } else if (via_kv && !nb.done) {  // unrated but kept (off format): its cache is still needed
          nb.ctx = parent.ctx.fork();
          KvSequence* one[] = {&nb.ctx};
          const std::span<const int32_t> part[] = {c.line.tokens};
          if (Status st = prefill_together(*lm.model, **kv, one, part, pool); !st.ok()) return prefill_failed(st);
        }
        next[p].push_back(std::move(nb));
      }
    }
    beams = std::move(next);
  }
  r.policy_tokens = (*proposer)->tokens_sampled() + (answerer ? answerer->tokens_sampled() : 0);
  for (size_t p = 0; p < problems.size(); ++p) {
    ++r.n_problems;
    const auto best = std::max_element(beams[p].begin(), beams[p].end(), [](const Beam& a, const Beam& b) {
      return a.done != b.done ? b.done : a.score < b.score;  // a finished beam beats an open one
    });
    const SolutionCheck check = check_lines(best->lines, problems[p]);
    r.n_correct += check.answer_correct;
    r.correct.push_back(check.answer_correct);
    r.solutions.push_back(best->lines);
  }
  r.seconds_scoring = scoring;
  r.seconds_total = seconds_since(t_start);
  return r;
}

}  // namespace agentkv::prm
