#include "lab/prm/step_labels.h"

#include <algorithm>
#include <cstdlib>
#include <sstream>

#include "lab/prm/arith_prompt.h"
#include "kv/direct_prefill.h"
#include "lab/prm/step_checker.h"
#include "lab/prm/trajectory.h"
#include "util/input_file.h"

namespace agentkv::prm {
namespace {

// A dump is one line per proposal (the committed ones are tens of KB); 256 MiB is far beyond any.
constexpr int64_t kMaxStepDumpBytes = int64_t(256) << 20;

// The reference solution's step lines as text, without the "Answer:" line.
std::vector<std::string> reference_step_text(const ArithProblem& p) {
  std::vector<std::string> out;
  const std::string all = format_solution(p);
  size_t start = 0;
  while (start < all.size()) {
    const size_t nl = all.find('\n', start);
    std::string line = all.substr(start, nl - start);
    start = nl == std::string::npos ? all.size() : nl + 1;
    if (is_step_line(line)) out.push_back(std::move(line));
  }
  return out;
}

}  // namespace

Result<StepSet> new_step_set(const LoadedModel& lm, std::span<const ArithProblem> problems) {
  const Tokenizer& tok = *lm.tokenizer;
  StepSet set;
  for (const ArithProblem& p : problems) {
    auto text = arith_policy_prompt(tok, p);
    if (!text.ok()) return make_error(text.error());
    set.problems.push_back(p);
    set.prompts.push_back(tok.encode(*text, tok.add_bos_default(), true));
    std::vector<std::vector<int32_t>> lines;
    for (const std::string& l : reference_step_text(p)) lines.push_back(tok.encode(l + "\n", false, false));
    set.ref_lines.push_back(std::move(lines));
  }
  return set;
}

std::vector<std::string> step_prefix_lines(const ArithProblem& problem, size_t k, const std::string& line) {
  std::vector<std::string> lines = reference_step_text(problem);
  lines.resize(std::min(k, lines.size()));
  lines.push_back(line);
  return lines;
}

void add_proposal(StepSet& set, size_t problem, size_t k, StepProposal prop) {
  AGENTKV_CHECK(problem < set.problems.size() && k <= set.ref_lines[problem].size());
  AGENTKV_CHECK(set.with_answers || k < set.ref_lines[problem].size());
  ++set.n_proposals;
  const bool answer = set.with_answers && is_answer_line(prop.text);
  if (!answer && !is_step_line(prop.text)) return;
  const std::vector<std::string> lines = step_prefix_lines(set.problems[problem], k, prop.text);
  const SolutionCheck check = check_lines(lines, set.problems[problem]);
  if (answer) {  // right when it states the problem's answer
    const bool right = check.answer_correct;
    set.steps.push_back(LabelledStep{problem, k, std::move(prop), right ? 1 : 0,
                                     right ? "" : "the answer is not the problem's", right ? StepError::kNone : StepError::kOffTrack});
    return;
  }
  const StepCheck& last = check.steps.back();
  set.steps.push_back(LabelledStep{problem, k, std::move(prop), last.correct ? 1 : 0, last.why, last.error()});
}

bool is_step_before_end(const StepSet& set, const LabelledStep& s) {
  return s.k < set.ref_lines[s.problem].size() && !(set.with_answers && is_answer_line(s.proposal.text));
}

StopRole stop_role(const StepSet& set, const LabelledStep& s) {
  if (!set.with_answers) return StopRole::kNone;
  const bool answer = is_answer_line(s.proposal.text);
  if (s.k < set.ref_lines[s.problem].size()) {
    if (answer) return s.label ? StopRole::kNone : StopRole::kEarlyAnswer;
    return s.label ? StopRole::kRightNextStep : StopRole::kNone;
  }
  if (answer) return s.label ? StopRole::kRightFinalAnswer : StopRole::kNone;
  return StopRole::kExtraStep;
}

Result<StepSet> sample_labelled_steps(const LoadedModel& lm, std::span<const ArithProblem> problems,
                                      const ProposeOptions& opt, ThreadPool& pool, bool with_answers,
                                      bool offered_answers) {
  if (offered_answers && !with_answers) return make_error("offered answer lines are examples only with answer lines");
  auto set = new_step_set(lm, problems);
  if (!set.ok()) return set;
  set->with_answers = with_answers;
  std::vector<std::vector<int32_t>> contexts;
  std::vector<std::pair<size_t, size_t>> where;  // (problem, k) of each context
  for (size_t pi = 0; pi < set->problems.size(); ++pi)
    for (size_t k = 0; k < set->ref_lines[pi].size() + (with_answers ? 1 : 0); ++k) {
      contexts.push_back(concat_prefix(set->prompts[pi], set->ref_lines[pi], k));
      where.emplace_back(pi, k);
    }
  auto props = propose_steps(lm, contexts, opt, pool);
  if (!props.ok()) return make_error(props.error());
  std::vector<std::vector<int32_t>> answer_contexts;  // the contexts after at least one step, in order
  for (size_t c = 0; offered_answers && c < contexts.size(); ++c)
    if (where[c].second > 0) answer_contexts.push_back(contexts[c]);
  std::vector<StepProposal> offered;
  if (!answer_contexts.empty()) {
    auto answerer = create_answerer(lm, opt, pool);
    if (!answerer.ok()) return make_error(answerer.error());
    auto lines = (*answerer)->answer_lines(answer_contexts);
    if (!lines.ok()) return make_error(lines.error());
    offered = std::move(*lines);
  }
  size_t next_offered = 0;
  for (size_t c = 0; c < contexts.size(); ++c) {
    for (StepProposal& prop : (*props)[c]) add_proposal(*set, where[c].first, where[c].second, std::move(prop));
    if (offered_answers && where[c].second > 0) {
      add_proposal(*set, where[c].first, where[c].second, std::move(offered[next_offered++]));
      ++set->n_offered;
    }
  }
  return set;
}

Result<StepSet> read_step_dump(const LoadedModel& lm, const std::string& path, ArithSplit split, int n_problems,
                               const ArithShape& shape) {
  std::string text;
  AGENTKV_ASSIGN_OR_RETURN(text, read_input_file(path, kMaxStepDumpBytes, "--steps"));
  std::istringstream f(text);
  std::vector<ArithProblem> problems;
  for (int i = 0; i < n_problems; ++i) problems.push_back(generate_arith_problem(arith_seed(split, uint64_t(i)), shape));
  auto set = new_step_set(lm, problems);
  if (!set.ok()) return set;
  set->with_answers = true;  // a dump holds answer lines only when it was made with them
  const std::string want = split == ArithSplit::kTrain ? "train" : "heldout";
  std::string row;
  for (int line_no = 1; std::getline(f, row); ++line_no) {
    if (row.empty() || row[0] == '#') continue;  // comments say how the file was made
    std::vector<std::string> cols;
    size_t start = 0;
    for (size_t tab; cols.size() < 5 && (tab = row.find('\t', start)) != std::string::npos; start = tab + 1)
      cols.push_back(row.substr(start, tab - start));
    cols.push_back(row.substr(start));
    const std::string where = path + ":" + std::to_string(line_no) + ": ";
    if (cols.size() != 6) return make_error(where + "expected 6 tab-separated fields");
    if (cols[0] != "train" && cols[0] != "heldout") return make_error(where + "split '" + cols[0] + "' is not train or heldout");
    char* end = nullptr;
    const unsigned long long problem = std::strtoull(cols[1].c_str(), &end, 10);
    if (cols[1].empty() || *end) return make_error(where + "problem index '" + cols[1] + "' is not a number");
    const unsigned long long k = std::strtoull(cols[2].c_str(), &end, 10);
    if (cols[2].empty() || *end) return make_error(where + "step position '" + cols[2] + "' is not a number");
    if (cols[0] != want || problem >= uint64_t(n_problems)) continue;
    if (k > set->ref_lines[problem].size())
      return make_error(where + "step position " + cols[2] + " is past the problem's reference steps");
    StepProposal prop;
    prop.text = cols[5];
    prop.tokens = lm.tokenizer->encode(prop.text + "\n", false, false);
    add_proposal(*set, size_t(problem), size_t(k), std::move(prop));
  }
  return set;
}

Status for_each_step_group(const LoadedModel& lm, KvManager& kv, const StepSet& set, const RowOutputs& context_pass,
                           ThreadPool& pool, const StepGroupVisitor& visit, size_t first_problem) {
  // Problems go in groups: one pass for the prompts, one per reference line, one for the proposed
  // lines. Each pass repacks the weights, so the group size trades passes against KV memory.
  constexpr size_t kGroup = kStepGroupProblems;
  if (first_problem % kGroup != 0) return make_error("step contexts: the first problem does not start a group");
  for (size_t g0 = first_problem; g0 < set.problems.size(); g0 += kGroup) {
    const size_t g1 = std::min(set.problems.size(), g0 + kGroup);
    const std::vector<std::span<const int32_t>> prompt_tokens(set.prompts.begin() + std::ptrdiff_t(g0),
                                                              set.prompts.begin() + std::ptrdiff_t(g1));
    auto prompts = prefill_new(*lm.model, kv, prompt_tokens, pool, context_pass);
    if (!prompts.ok()) return make_error(prompts.error());
    std::vector<const KvSequence*> starts;
    std::vector<std::span<const std::vector<int32_t>>> refs;
    for (size_t pi = g0; pi < g1; ++pi) {
      starts.push_back(&(*prompts)[pi - g0]);
      refs.push_back(set.ref_lines[pi]);
    }
    auto after = line_contexts(*lm.model, kv, starts, refs, pool);  // [problem][k]: prompt + lines 0..k
    if (!after.ok()) return make_error(after.error());
    std::vector<KvSequence> cands;
    std::vector<KvSequence*> cand_ptrs;
    std::vector<std::span<const int32_t>> cand_tokens;
    std::vector<size_t> steps;
    for (size_t i = 0; i < set.steps.size(); ++i) {
      const LabelledStep& s = set.steps[i];
      if (s.problem < g0 || s.problem >= g1) continue;
      if (s.proposal.tokens.empty()) return make_error("step contexts: a proposed step has no tokens");
      cand_tokens.push_back(s.proposal.tokens);
      steps.push_back(i);
    }
    cands.reserve(cand_tokens.size());
    for (size_t i : steps) {
      const LabelledStep& s = set.steps[i];
      const KvSequence& ctx = s.k == 0 ? (*prompts)[s.problem - g0] : (*after)[s.problem - g0][s.k - 1];
      cands.push_back(ctx.fork());
      cand_ptrs.push_back(&cands.back());
    }
    if (cands.empty()) continue;
    if (Status st = prefill_together(*lm.model, kv, cand_ptrs, cand_tokens, pool, context_pass); !st.ok())
      return make_error(st.error());
    const std::vector<const KvSequence*> contexts(cand_ptrs.begin(), cand_ptrs.end());
    AGENTKV_TRY(visit(contexts, steps));
  }
  return {};
}

Result<PrmScores> kv_score_labelled(const LoadedModel& lm, const StepSet& set, const VerifyHead& head,
                                    ThreadPool& pool, int64_t kv_mem_bytes) {
  KvManagerOptions ko;
  ko.mem_bytes = kv_mem_bytes;
  auto kv = KvManager::create(lm.config(), lm.fingerprint, ko);
  if (!kv.ok()) return make_error(kv.error());
  PrmScores out;
  // A probe-only head reads block feature_layer - 1: the blocks above it are never needed, so these
  // scoring-only contexts skip them.
  const RowOutputs context_pass{nullptr, nullptr, 0, head.read_logits || head.every_layer ? 0 : head.feature_layer};
  AGENTKV_TRY(for_each_step_group(lm, **kv, set, context_pass, pool,
                                  [&](std::span<const KvSequence* const> contexts, std::span<const size_t>) -> Status {
                                    auto scores = kv_prm_score(*lm.model, **kv, contexts, head, pool);
                                    if (!scores.ok()) return scores.status_error();
                                    out.n_features = scores->n_features;
                                    auto append = [](auto& to, const auto& from) {
                                      to.insert(to.end(), from.begin(), from.end());
                                    };
                                    append(out.logodds, scores->logodds);
                                    append(out.score, scores->score);
                                    append(out.features, scores->features);
                                    append(out.every_layer, scores->every_layer);
                                    return {};
                                  }));
  return out;
}

}  // namespace agentkv::prm
