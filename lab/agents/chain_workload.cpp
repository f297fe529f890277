// chain: a planner reads a long project brief and writes a plan; executors 1..n-1 then run one at a
// time, each reading the same brief, the plan and every earlier executor's output. Everything an
// agent reads before its instruction is shared context that only grows, round after round.
#include <string>
#include <vector>

#include "persona_text.h"
#include "workload_internal.h"

namespace agentkv {

namespace {

// Plans and step reports are naturally multi-line (numbered steps), so they keep a few lines.
constexpr int kPlanLines = 24;
constexpr int kStepLines = 8;

class ChainWorkload : public WorkloadBase {
 public:
  explicit ChainWorkload(const WorkloadOptions& opt) : WorkloadBase("chain", opt) {
    context_ = text::project_brief(opt.seed);
    visible_end_.push_back(context_.size());
  }

  // Round r has one turn: the planner (agent 0) in round 0, executor r in round r.
  std::vector<AgentTurn> round(int r) override {
    cursor_.begin_round(r);
    AgentTurn t;
    t.agent = r;
    t.prompt = context_.substr(0, visible_end_[static_cast<size_t>(r)]);
    t.private_end = 0;
    t.shared_end = t.prompt.size();
    const int executors = opt_.n_agents - 1;
    if (r == 0) {
      t.max_tokens = 80;
      t.min_tokens = 30;
      t.prompt += "Planner, write a numbered plan for this project with exactly " + std::to_string(executors) +
                  (executors == 1 ? " step" : " steps") +
                  ", one line each; Executor k will carry out step k, in order.\nPlanner:";
    } else {
      t.max_tokens = 60;
      t.min_tokens = 20;
      t.prompt += speaker(r) + ", carry out step " + std::to_string(r) +
                  " of the plan above: say what you did and what came out of it, in a few sentences.\n" +
                  speaker(r) + ":";
    }
    return {t};
  }

  void record(int r, const std::vector<std::string>& replies) override {
    cursor_.end_round(r, replies.size(), 1);
    context_ += speaker(r) + ": " + clean_reply(replies[0], r == 0 ? kPlanLines : kStepLines) + "\n\n";
    visible_end_.push_back(context_.size());
  }

 private:
  static std::string speaker(int r) { return r == 0 ? "Planner" : "Executor " + std::to_string(r); }

  std::string context_;              // brief, plan and step reports so far
  std::vector<size_t> visible_end_;  // [r]: the context length round r reads
};

}  // namespace

std::unique_ptr<Workload> make_chain_workload(const WorkloadOptions& opt) {
  return std::make_unique<ChainWorkload>(opt);
}

}  // namespace agentkv
