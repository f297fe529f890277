// generative-agents, agent-society and long-history-society: a town simulation in the style of
// Generative Agents (Smallville). Every agent has a private persona + memory prefix; each round all
// agents read the same digest of the previous round's messages and write one short message to the
// town. In long-history-society nothing is forgotten: an agent's context is its short persona, then
// every round's digest, the instruction and its own answer, so after a few rounds the shared digests
// are most of each context (the shape of TokenDance's AgentSociety runs, arXiv 2604.03143).
#include <algorithm>
#include <string>
#include <utility>
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
  bool history = false;  // contexts accumulate every round (long-history-society)
};

// Private prefixes of 300-800 SmolLM2 tokens: these profiles measure 3.6-4.2 characters a token.
const TownStyle kGenerativeAgents = {"generative-agents", {1400, 2850, false}, 60, 30};
// Compact personas of 80-200 tokens (3.4-4.1 characters a token), so a thousand agents stay cheap.
const TownStyle kAgentSociety = {"agent-society", {380, 680, true}, 40, 15};
// Personas of 95-190 tokens (agent-society's, capped lower): small beside the history.
const TownStyle kLongHistorySociety = {"long-history-society", {380, 660, true}, 40, 15, true};

class TownWorkload : public WorkloadBase {
 public:
  TownWorkload(const TownStyle& style, const WorkloadOptions& opt)
      : WorkloadBase(style.name, opt), style_(style), town_(text::make_town(opt.seed)),
        cast_(text::make_cast(opt.seed, opt.n_agents)) {
    for (int i = 0; i < opt.n_agents; ++i) {
      profiles_.push_back(text::resident_profile(cast_, i, town_, opt.seed, style.profile));
    }
    if (style.history) {
      history_ = profiles_;
      history_pieces_.resize(profiles_.size());
      history_shared_.resize(profiles_.size());
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
      if (style_.history) {
        t.prompt = history_[static_cast<size_t>(i)];
        t.earlier_pieces = history_pieces_[static_cast<size_t>(i)];
        t.earlier_piece_shared = history_shared_[static_cast<size_t>(i)];
      } else {
        t.prompt = profiles_[static_cast<size_t>(i)];
      }
      t.private_end = t.prompt.size();
      t.prompt += digest;
      t.shared_end = t.prompt.size();
      t.prompt += "Write " + me.first + "'s next message to the town: one or two sentences, reacting to the "
                  "above, in character.\n" + me.full + ":";
      turns.push_back(std::move(t));
    }
    if (style_.history) last_turns_ = turns;
    return turns;
  }

  void record(int r, const std::vector<std::string>& replies) override {
    cursor_.end_round(r, replies.size(), static_cast<size_t>(opt_.n_agents));
    std::vector<std::string> cleaned;
    for (const std::string& reply : replies) cleaned.push_back(clean_reply(reply));
    if (style_.history) {
      // The turn as read, then the agent's own answer on the line the instruction opened: the next
      // prompt starts with this whole context.
      for (size_t i = 0; i < last_turns_.size(); ++i) {
        const AgentTurn& t = last_turns_[i];
        std::string& h = history_[static_cast<size_t>(t.agent)];
        auto& pieces = history_pieces_[static_cast<size_t>(t.agent)];
        auto& shared = history_shared_[static_cast<size_t>(t.agent)];
        h = t.prompt;
        pieces = t.earlier_pieces;
        shared = t.earlier_piece_shared;
        pieces.emplace_back(t.private_end, t.shared_end);
        shared.push_back(true);
        const size_t answer_begin = h.size();
        h += ' ';  // piecewise: g++ 12 raises a false -Wrestrict on " " + std::string + "\n"
        h += cleaned[i];
        h += '\n';
        pieces.emplace_back(answer_begin, h.size());
        shared.push_back(false);
      }
      last_turns_.clear();
    }
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
  // long-history-society: each agent's context so far and its pieces (AgentTurn::earlier_pieces), and
  // the turns of the round produced and not yet recorded.
  std::vector<std::string> history_;
  std::vector<std::vector<std::pair<size_t, size_t>>> history_pieces_;
  std::vector<std::vector<bool>> history_shared_;  // AgentTurn::earlier_piece_shared
  std::vector<AgentTurn> last_turns_;
};

}  // namespace

std::unique_ptr<Workload> make_generative_agents_workload(const WorkloadOptions& opt) {
  return std::make_unique<TownWorkload>(kGenerativeAgents, opt);
}

std::unique_ptr<Workload> make_agent_society_workload(const WorkloadOptions& opt) {
  return std::make_unique<TownWorkload>(kAgentSociety, opt);
}

std::unique_ptr<Workload> make_long_history_society_workload(const WorkloadOptions& opt) {
  return std::make_unique<TownWorkload>(kLongHistorySociety, opt);
}

}  // namespace agentkv
