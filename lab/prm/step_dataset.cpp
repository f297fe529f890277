#include "lab/prm/step_dataset.h"

#include <algorithm>

#include "engine/engine.h"
#include "engine/request_outcome.h"
#include "lab/prm/arith_prompt.h"
#include "prm/kv_scorer.h"
#include "kv/direct_prefill.h"
#include "lab/prm/trajectory.h"

namespace agentkv::prm {

Result<std::vector<ProblemCandidates>> sample_candidates(const LoadedModel& lm, std::span<const ArithProblem> problems,
                                                         const SampleOptions& opt, ThreadPool& pool) {
  const Tokenizer& tok = *lm.tokenizer;
  EngineOptions eo;
  eo.kv.mem_bytes = opt.kv_mem_bytes;
  eo.max_n = std::max(64, opt.n_samples);
  auto engine = Engine::create(lm, eo, pool);
  if (!engine.ok()) return make_error(engine.error());
  std::vector<ProblemCandidates> out(problems.size());
  for (size_t i = 0; i < problems.size(); ++i) {
    ProblemCandidates& pc = out[i];
    pc.problem = problems[i];
    auto text = arith_policy_prompt(tok, pc.problem);
    if (!text.ok()) return make_error(text.error());
    pc.prompt = tok.encode(*text, tok.add_bos_default(), true);
    pc.candidates.resize(size_t(opt.n_samples));
    RequestParams rp;
    rp.prompt = pc.prompt;
    rp.n = opt.n_samples;
    rp.max_tokens = opt.max_tokens;
    rp.top_logprobs = 0;
    rp.sampling.temperature = opt.temperature;
    // Distinct per problem, so two problems with the same prompt length do not share a stream.
    rp.sampling.seed = opt.seed * 1000003u + pc.problem.seed;
    std::vector<Candidate>* cands = &pc.candidates;
    auto id = (*engine)->add_request(rp, [cands](const RequestEvent& ev) {
      if (!ev.has_token || size_t(ev.seq_index) >= cands->size()) return;
      Candidate& c = (*cands)[size_t(ev.seq_index)];
      if (!answer_token(ev)) return;
      c.tokens.push_back(ev.token);
      c.logprob += ev.logprob.logprob;
    });
    if (!id.ok()) return make_error(id.error());
  }
  if (Status st = (*engine)->run_until_idle(); !st.ok()) return make_error(st.error());
  for (ProblemCandidates& pc : out) {
    for (Candidate& c : pc.candidates) {
      c.lines = split_lines(tok, c.tokens);
      for (const auto& l : c.lines) c.line_text.push_back(tok.decode(l));
      c.check = check_lines(c.line_text, pc.problem);
    }
  }
  return out;
}

Result<std::vector<ScoredStep>> kv_score_steps(const LoadedModel& lm, std::span<const ProblemCandidates> problems,
                                               const VerifyHead& head, ThreadPool& pool, int64_t kv_mem_bytes) {
  KvManagerOptions ko;
  ko.mem_bytes = kv_mem_bytes;
  auto kv = KvManager::create(lm.config(), lm.fingerprint, ko);
  if (!kv.ok()) return make_error(kv.error());
  std::vector<ScoredStep> out;
  // Problems go in groups: one pass for the group's prompts, one per line index, one for all verify
  // tokens. Each pass repacks the weights, so the group size trades passes against KV memory.
  constexpr size_t kGroup = 8;
  for (size_t g0 = 0; g0 < problems.size(); g0 += kGroup) {
    const size_t g1 = std::min(problems.size(), g0 + kGroup);
    std::vector<std::span<const int32_t>> prompt_tokens;
    for (size_t pi = g0; pi < g1; ++pi) prompt_tokens.push_back(problems[pi].prompt);
    auto prompts = prefill_new(*lm.model, **kv, prompt_tokens, pool);
    if (!prompts.ok()) return make_error(prompts.error());
    std::vector<const KvSequence*> starts;
    std::vector<std::span<const std::vector<int32_t>>> trajs;
    std::vector<std::pair<size_t, size_t>> owner;  // (problem, candidate) of each trajectory
    for (size_t pi = g0; pi < g1; ++pi) {
      for (size_t ci = 0; ci < problems[pi].candidates.size(); ++ci) {
        const Candidate& c = problems[pi].candidates[ci];
        if (c.check.steps.empty()) continue;
        starts.push_back(&(*prompts)[pi - g0]);
        // Lines past the last step are never scored, so their K/V is not needed.
        trajs.push_back(std::span(c.lines).first(c.check.step_line.back() + 1));
        owner.emplace_back(pi, ci);
      }
    }
    if (trajs.empty()) continue;
    auto contexts = line_contexts(*lm.model, **kv, starts, trajs, pool);
    if (!contexts.ok()) return make_error(contexts.error());
    std::vector<const KvSequence*> scored;
    std::vector<ScoredStep> steps;
    for (size_t t = 0; t < trajs.size(); ++t) {
      const auto [pi, ci] = owner[t];
      const Candidate& c = problems[pi].candidates[ci];
      for (size_t s = 0; s < c.check.steps.size(); ++s) {
        scored.push_back(&(*contexts)[t][c.check.step_line[s]]);
        steps.push_back(ScoredStep{pi, ci, s, 0.0f, 0.0, c.check.steps[s].correct ? 1 : 0});
      }
    }
    auto scores = kv_prm_score(*lm.model, **kv, scored, head, pool);
    if (!scores.ok()) return make_error(scores.error());
    for (size_t i = 0; i < steps.size(); ++i) {
      steps[i].logodds = scores->logodds[i];
      steps[i].score = scores->score[i];
      out.push_back(steps[i]);
    }
  }
  return out;
}

}  // namespace agentkv::prm
