#include "lab/prm/step_values.h"

#include <algorithm>

#include "lab/prm/trajectory.h"

namespace agentkv::prm {

double rollout_step_value(std::span<const std::string> prefix_lines, std::span<const std::string> rollouts,
                          const ArithProblem& problem) {
  if (rollouts.empty()) return 0.0;
  int reached = 0;
  for (const std::string& text : rollouts) {
    std::vector<std::string> lines(prefix_lines.begin(), prefix_lines.end());
    size_t start = 0;
    while (start < text.size()) {
      const size_t nl = text.find('\n', start);
      lines.push_back(text.substr(start, nl == std::string::npos ? std::string::npos : nl - start));
      start = nl == std::string::npos ? text.size() : nl + 1;
    }
    if (check_lines(lines, problem).answer_correct) ++reached;
  }
  return double(reached) / double(rollouts.size());
}

Result<std::vector<double>> rollout_step_values(const LoadedModel& lm, const StepSet& set, const RolloutOptions& opt,
                                                ThreadPool& pool) {
  if (opt.n < 1 || opt.max_tokens < 1) return make_error("step values: rollouts and their length must be >= 1");
  ProposeOptions po;
  po.n = opt.n;
  po.temperature = opt.temperature;
  po.max_tokens = opt.max_tokens;
  po.seed = opt.seed;
  po.kv_mem_bytes = opt.kv_mem_bytes;
  auto proposer = StepProposer::create(lm, po, pool);
  if (!proposer.ok()) return make_error(proposer.error());
  std::vector<std::vector<int32_t>> contexts;
  for (const LabelledStep& s : set.steps) {
    std::vector<int32_t> ctx = concat_prefix(set.prompts[s.problem], set.ref_lines[s.problem], s.k);
    ctx.insert(ctx.end(), s.proposal.tokens.begin(), s.proposal.tokens.end());
    contexts.push_back(std::move(ctx));
  }
  // Steps go to the engine in chunks, which bounds the sequences it holds at once.
  constexpr size_t kChunk = 64;
  std::vector<double> out;
  for (size_t c0 = 0; c0 < contexts.size(); c0 += kChunk) {
    const size_t c1 = std::min(contexts.size(), c0 + kChunk);
    auto rollouts = (*proposer)->sample(std::span(contexts).subspan(c0, c1 - c0), opt.max_tokens, false);
    if (!rollouts.ok()) return make_error(rollouts.error());
    for (size_t i = c0; i < c1; ++i) {
      const LabelledStep& s = set.steps[i];
      std::vector<std::string> texts;
      for (const StepProposal& r : (*rollouts)[i - c0]) texts.push_back(lm.tokenizer->decode(r.tokens));
      out.push_back(rollout_step_value(step_prefix_lines(set.problems[s.problem], s.k, s.proposal.text), texts,
                                       set.problems[s.problem]));
    }
  }
  return out;
}

}  // namespace agentkv::prm
