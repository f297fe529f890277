// generative-agents and agent-society: a town simulation in the style of Generative Agents
// (Smallville). Every agent has a private persona + memory prefix; each round all agents read the
// same digest of the previous round's messages and write one short message to the town.
#include <algorithm>
#include <string>
#include <vector>

#include "persona_text.h"
#include "workload_internal.h"

namespace agentkv {

namespace {

struct TownStyle {
  const char* name;
  text::ProfileShape profile;
  int max_tokens;
  int min_tokens;
};

// Private prefixes of 300-800 SmolLM2 tokens: these profiles measure 3.6-4.2 characters a token.
const TownStyle kGenerativeAgents = {"generative-agents", {1400, 2850, false}, 60, 30};
// Compact personas of 80-200 tokens (3.4-4.1 characters a token), so a thousand agents stay cheap.
const TownStyle kAgentSociety = {"agent-society", {380, 680, true}, 40, 15};

class TownWorkload : public WorkloadBase {
 public:
  TownWorkload(const TownStyle& style, const WorkloadOptions& opt)
      : WorkloadBase(style.name, opt), style_(style), town_(text::make_town(opt.seed)),
        cast_(text::make_cast(opt.seed, opt.n_agents)) {
    for (int i = 0; i < opt.n_agents; ++i) {
      profiles_.push_back(text::resident_profile(cast_, i, town_, opt.seed, style.profile));
    }
  }

  std::vector<AgentTurn> round(int r) override {
    cursor_.begin_round(r);
    const std::string digest = digest_text(r);
    std::vector<AgentTurn> turns;
    turns.reserve(static_cast<size_t>(opt_.n_agents));
    for (int i = 0; i < opt_.n_agents; ++i) {
      const text::Person& me = cast_[static_cast<size_t>(i)];
      AgentTurn t;
      t.agent = i;
      t.max_tokens = style_.max_tokens;
      t.min_tokens = style_.min_tokens;
      t.prompt = profiles_[static_cast<size_t>(i)];
      t.private_end = t.prompt.size();
      t.prompt += digest;
      t.shared_end = t.prompt.size();
      t.prompt += "Write " + me.first + "'s next message to the town: one or two sentences, reacting to the "
                  "above, in character.\n" + me.full + ":";
      turns.push_back(std::move(t));
    }
    return turns;
  }

  void record(int r, const std::vector<std::string>& replies) override {
    cursor_.end_round(r, replies.size(), static_cast<size_t>(opt_.n_agents));
    std::vector<std::string> cleaned;
    for (const std::string& reply : replies) cleaned.push_back(clean_reply(reply));
    messages_.push_back(std::move(cleaned));
  }

 private:
  // Round 0: the opening announcement. Later rounds: the previous round's messages in agent order,
  // all of them or a subset of digest_messages drawn from (seed, round).
  std::string digest_text(int r) const {
    if (r == 0) {
      return "=== Announcement in the town square of " + town_.name + ", " + text::format_date(town_.today) +
             " ===\n" + text::town_announcement(opt_.seed, town_) + "\n\n";
    }
    const std::vector<std::string>& said = messages_[static_cast<size_t>(r - 1)];
    const int n = opt_.n_agents;
    std::string out = "=== What the residents of " + town_.name + " said in round " + std::to_string(r) + ", " +
                      text::format_date(town_.today + r - 1) + " ===\n";
    std::vector<int> quoted;
    if (n <= opt_.digest_messages) {
      for (int i = 0; i < n; ++i) quoted.push_back(i);
    } else {
      text::Rng rng(text::derive_seed(opt_.seed, text::kStreamDigest, static_cast<uint64_t>(r)));
      quoted = rng.sample(n, opt_.digest_messages);
      std::sort(quoted.begin(), quoted.end());
      // Appending piecewise: g++ 12 raises a false -Wrestrict on "literal" + std::string temporaries.
      out += '(';
      out += std::to_string(n) + " residents spoke; ";
      out += std::to_string(quoted.size()) + " of their messages, picked at random, follow.)\n";
    }
    for (int i : quoted) out += cast_[static_cast<size_t>(i)].full + ": " + said[static_cast<size_t>(i)] + "\n";
    return out + "\n";
  }

  TownStyle style_;
  text::Town town_;
  std::vector<text::Person> cast_;
  std::vector<std::string> profiles_;
  std::vector<std::vector<std::string>> messages_;  // cleaned replies, per recorded round
};

}  // namespace

std::unique_ptr<Workload> make_generative_agents_workload(const WorkloadOptions& opt) {
  return std::make_unique<TownWorkload>(kGenerativeAgents, opt);
}

std::unique_ptr<Workload> make_agent_society_workload(const WorkloadOptions& opt) {
  return std::make_unique<TownWorkload>(kAgentSociety, opt);
}

}  // namespace agentkv
