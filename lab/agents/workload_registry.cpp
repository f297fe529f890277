#include <cctype>
#include <string>
#include <vector>

#include "workload.h"
#include "workload_internal.h"

namespace agentkv {

namespace {

struct WorkloadSpec {
  const char* name;
  int default_agents, min_agents, max_agents;
  // A workload with rounds_per_agent runs exactly one round per agent (chain).
  int default_rounds, min_rounds, max_rounds;
  bool rounds_per_agent;
  std::unique_ptr<Workload> (*make)(const WorkloadOptions&);
};

// Round limits keep the longest prompt inside an 8k context (debate's transcript grows with
// agents x rounds; the town digests are capped by digest_messages instead, and long-history-society's
// contexts grow by one digest a round).
const WorkloadSpec kSpecs[] = {
    {"generative-agents", 25, 2, 200, 3, 1, 50, false, make_generative_agents_workload},
    {"agent-society", 100, 2, 1000, 3, 1, 50, false, make_agent_society_workload},
    // Every round's digest stays in each context: 6 rounds of 32 quoted messages stay inside 8k.
    {"long-history-society", 200, 2, 1000, 5, 1, 6, false, make_long_history_society_workload},
    {"debate", 4, 4, 8, 4, 1, 10, false, make_debate_workload},
    {"chain", 5, 2, 20, 0, 0, 0, true, make_chain_workload},
};

constexpr int kMaxDigestMessages = 1000;

std::string range_text(int lo, int hi) { return std::to_string(lo) + ".." + std::to_string(hi); }

bool is_reply_space(unsigned char c) { return std::isspace(c) || std::iscntrl(c); }

}  // namespace

std::vector<std::string> workload_names() {
  std::vector<std::string> names;
  for (const WorkloadSpec& s : kSpecs) names.push_back(s.name);
  return names;
}

Result<std::unique_ptr<Workload>> make_workload(const std::string& name, const WorkloadOptions& opt) {
  const WorkloadSpec* spec = nullptr;
  for (const WorkloadSpec& s : kSpecs) {
    if (name == s.name) spec = &s;
  }
  if (spec == nullptr) {
    std::string choices;
    for (const std::string& n : workload_names()) choices += (choices.empty() ? "" : ", ") + n;
    return make_error("unknown workload '" + name + "' (choose " + choices + ")");
  }
  WorkloadOptions o = opt;
  if (o.n_agents == 0) o.n_agents = spec->default_agents;
  if (o.n_agents < spec->min_agents || o.n_agents > spec->max_agents) {
    return make_error(name + " needs " + range_text(spec->min_agents, spec->max_agents) + " agents, got " +
                      std::to_string(o.n_agents));
  }
  if (spec->rounds_per_agent) {
    if (o.n_rounds != 0 && o.n_rounds != o.n_agents) {
      return make_error(name + " runs one round per agent: n_rounds must be 0 or " + std::to_string(o.n_agents) +
                        ", got " + std::to_string(o.n_rounds));
    }
    o.n_rounds = o.n_agents;
  } else {
    if (o.n_rounds == 0) o.n_rounds = spec->default_rounds;
    if (o.n_rounds < spec->min_rounds || o.n_rounds > spec->max_rounds) {
      return make_error(name + " needs " + range_text(spec->min_rounds, spec->max_rounds) + " rounds, got " +
                        std::to_string(o.n_rounds));
    }
  }
  if (o.digest_messages < 1 || o.digest_messages > kMaxDigestMessages) {
    return make_error("digest_messages must be " + range_text(1, kMaxDigestMessages) + ", got " +
                      std::to_string(o.digest_messages));
  }
  return spec->make(o);
}

void RoundCursor::begin_round(int r) {
  // Asking again for a round already produced (or recorded) is fine: prompts are deterministic.
  AGENTKV_CHECK(r >= 0 && r < n_rounds_);
  AGENTKV_CHECK(r <= recorded_);
  if (r == recorded_) produced_ = r;
}

void RoundCursor::end_round(int r, size_t n_replies, size_t n_turns) {
  AGENTKV_CHECK(r == recorded_ && r == produced_);
  AGENTKV_CHECK(n_replies == n_turns);
  ++recorded_;
}

std::string clean_reply(std::string_view reply, int max_lines) {
  std::string out;
  int lines = 0;
  size_t pos = 0;
  while (pos <= reply.size() && lines < max_lines) {
    size_t eol = reply.find('\n', pos);
    if (eol == std::string_view::npos) eol = reply.size();
    std::string line;
    bool pending_space = false;
    for (size_t i = pos; i < eol; ++i) {
      const auto c = static_cast<unsigned char>(reply[i]);
      if (is_reply_space(c)) {
        pending_space = !line.empty();
      } else {
        if (pending_space) line += ' ';
        pending_space = false;
        line += static_cast<char>(c);
      }
    }
    if (!line.empty()) {
      if (lines++ > 0) out += '\n';
      out += line;
    }
    pos = eol + 1;
  }
  return out.empty() ? "(says nothing)" : out;
}

}  // namespace agentkv
