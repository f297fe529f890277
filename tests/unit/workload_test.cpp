#include "lab/agents/workload.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "lab/agents/bench_agents.h"
#include "lab/agents/persona_text.h"
#include "lab/agents/workload_internal.h"

namespace agentkv {
namespace {

using Rounds = std::vector<std::vector<AgentTurn>>;
using ReplyFn = std::function<std::string(int round, int agent)>;

std::unique_ptr<Workload> test_workload(const std::string& name, int agents = 0, uint64_t seed = 1, int rounds = 0) {
  WorkloadOptions o;
  o.n_agents = agents;
  o.n_rounds = rounds;
  o.seed = seed;
  auto w = make_workload(name, o);
  EXPECT_TRUE(w.ok()) << w.error();
  return std::move(w.value());
}

std::string canned_reply(int round, int agent) {
  return "reply of agent " + std::to_string(agent) + " in round " + std::to_string(round);
}

// Plays every round, answering each turn with reply(round, agent); returns the turns of each round.
Rounds play(Workload& w, const ReplyFn& reply = canned_reply) {
  Rounds all;
  for (int r = 0; r < w.n_rounds(); ++r) {
    all.push_back(w.round(r));
    std::vector<std::string> replies;
    for (const AgentTurn& t : all.back()) replies.push_back(reply(r, t.agent));
    w.record(r, replies);
  }
  return all;
}

std::string private_part(const AgentTurn& t) { return t.prompt.substr(0, t.private_end); }
std::string shared_part(const AgentTurn& t) { return t.prompt.substr(t.private_end, t.shared_end - t.private_end); }

bool starts_with(const std::string& s, const std::string& prefix) { return s.compare(0, prefix.size(), prefix) == 0; }
bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

int count_lines_starting(const std::string& text, const std::string& prefix) {
  int n = 0;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t eol = text.find('\n', pos);
    if (eol == std::string::npos) eol = text.size();
    if (text.compare(pos, prefix.size(), prefix) == 0) ++n;
    pos = eol + 1;
  }
  return n;
}

std::string error_of(const std::string& name, WorkloadOptions o) {
  auto w = make_workload(name, o);
  return w.ok() ? "" : w.error();
}

WorkloadOptions agents_rounds(int agents, int rounds) {
  WorkloadOptions o;
  o.n_agents = agents;
  o.n_rounds = rounds;
  return o;
}

TEST(WorkloadText, SplitMix64MatchesReferenceOutput) {
  // First outputs of splitmix64 seeded with 0 (Vigna's reference implementation).
  text::Rng rng(0);
  EXPECT_EQ(rng.next(), 0xE220A8397B1DCDAFull);
  EXPECT_EQ(rng.next(), 0x6E789E6AA1B965F4ull);
}

TEST(WorkloadText, UniformStaysInRangeAndReachesBothEnds) {
  text::Rng rng(7);
  std::set<int> seen;
  for (int i = 0; i < 2000; ++i) {
    const int v = rng.uniform(-3, 3);
    ASSERT_GE(v, -3);
    ASSERT_LE(v, 3);
    seen.insert(v);
  }
  EXPECT_EQ(seen.size(), 7u);
}

TEST(WorkloadText, CastNamesAreDistinctEvenForAThousandAgents) {
  const auto cast = text::make_cast(3, 1000);
  std::set<std::string> names;
  for (const auto& p : cast) names.insert(p.full);
  EXPECT_EQ(names.size(), 1000u);
}

TEST(WorkloadReply, CleaningTrimsCutsAtNewlineAndCollapsesWhitespace) {
  EXPECT_EQ(clean_reply("  Hello   there,\tneighbors!  \nBob: and more"), "Hello there, neighbors!");
  EXPECT_EQ(clean_reply("\n\n  late start\r\n"), "late start");
  EXPECT_EQ(clean_reply(""), "(says nothing)");
  EXPECT_EQ(clean_reply(" \n\t\n "), "(says nothing)");
  EXPECT_EQ(clean_reply("1. a\n\n 2.  b \n3. c", 2), "1. a\n2. b");
}

TEST(WorkloadRegistry, NamesAndDefaults) {
  EXPECT_EQ(workload_names(), (std::vector<std::string>{"generative-agents", "agent-society", "long-history-society",
                                                        "debate", "chain"}));
  struct Expect {
    const char* name;
    int agents, rounds;
  };
  for (const Expect& e : {Expect{"generative-agents", 25, 3}, Expect{"agent-society", 100, 3},
                          Expect{"long-history-society", 200, 5}, Expect{"debate", 4, 4}, Expect{"chain", 5, 5}}) {
    auto w = test_workload(e.name);
    EXPECT_EQ(w->name(), e.name);
    EXPECT_EQ(w->n_agents(), e.agents) << e.name;
    EXPECT_EQ(w->n_rounds(), e.rounds) << e.name;
  }
}

TEST(WorkloadRegistry, ErrorsNameTheProblem) {
  EXPECT_EQ(error_of("x", {}),
            "unknown workload 'x' (choose generative-agents, agent-society, long-history-society, debate, chain)");
  EXPECT_EQ(error_of("long-history-society", agents_rounds(0, 7)), "long-history-society needs 1..6 rounds, got 7");
  EXPECT_EQ(error_of("agent-society", agents_rounds(5000, 0)), "agent-society needs 2..1000 agents, got 5000");
  EXPECT_EQ(error_of("generative-agents", agents_rounds(1, 0)), "generative-agents needs 2..200 agents, got 1");
  EXPECT_EQ(error_of("generative-agents", agents_rounds(201, 0)), "generative-agents needs 2..200 agents, got 201");
  EXPECT_EQ(error_of("generative-agents", agents_rounds(0, 51)), "generative-agents needs 1..50 rounds, got 51");
  EXPECT_EQ(error_of("agent-society", agents_rounds(0, -1)), "agent-society needs 1..50 rounds, got -1");
  EXPECT_EQ(error_of("debate", agents_rounds(3, 0)), "debate needs 4..8 agents, got 3");
  EXPECT_EQ(error_of("debate", agents_rounds(9, 0)), "debate needs 4..8 agents, got 9");
  EXPECT_EQ(error_of("debate", agents_rounds(0, 11)), "debate needs 1..10 rounds, got 11");
  EXPECT_EQ(error_of("chain", agents_rounds(21, 0)), "chain needs 2..20 agents, got 21");
  EXPECT_EQ(error_of("chain", agents_rounds(5, 3)), "chain runs one round per agent: n_rounds must be 0 or 5, got 3");
  WorkloadOptions o;
  o.digest_messages = 0;
  EXPECT_EQ(error_of("agent-society", o), "digest_messages must be 1..1000, got 0");
  EXPECT_EQ(error_of("chain", agents_rounds(7, 7)), "");
}

TEST(WorkloadAll, SameSeedSamePromptsDifferentSeedDifferentPrompts) {
  for (const std::string& name : workload_names()) {
    const int agents = name == "agent-society" ? 40 : 0;
    auto a = test_workload(name, agents, 11);
    auto b = test_workload(name, agents, 11);
    auto c = test_workload(name, agents, 12);
    const Rounds ra = play(*a), rb = play(*b), rc = play(*c);
    ASSERT_EQ(ra.size(), rb.size());
    for (size_t r = 0; r < ra.size(); ++r) {
      ASSERT_EQ(ra[r].size(), rb[r].size());
      for (size_t i = 0; i < ra[r].size(); ++i) {
        EXPECT_EQ(ra[r][i].prompt, rb[r][i].prompt) << name << " round " << r << " turn " << i;
        EXPECT_EQ(ra[r][i].private_end, rb[r][i].private_end);
        EXPECT_EQ(ra[r][i].shared_end, rb[r][i].shared_end);
      }
    }
    EXPECT_NE(ra[0][0].prompt, rc[0][0].prompt) << name;
  }
}

TEST(WorkloadAll, SegmentsAreOrderedAndMeetAtLineBoundaries) {
  for (const std::string& name : workload_names()) {
    auto w = test_workload(name, name == "agent-society" ? 50 : 0, 5);
    for (const auto& turns : play(*w)) {
      for (const AgentTurn& t : turns) {
        ASSERT_LE(t.private_end, t.shared_end) << name;
        ASSERT_LT(t.shared_end, t.prompt.size()) << name;
        EXPECT_GT(t.max_tokens, t.min_tokens) << name;
        // Each segment ends a line and the next starts with a non-space: the same token split for all.
        if (t.private_end > 0) {
          EXPECT_EQ(t.prompt[t.private_end - 1], '\n') << name;
        }
        EXPECT_EQ(t.prompt[t.shared_end - 1], '\n') << name;
        EXPECT_FALSE(std::isspace(static_cast<unsigned char>(t.prompt[t.private_end]))) << name;
        EXPECT_FALSE(std::isspace(static_cast<unsigned char>(t.prompt[t.shared_end]))) << name;
        EXPECT_EQ(t.prompt.back(), ':') << name;
      }
    }
  }
}

TEST(WorkloadTown, PrivatePrefixLengthsAndVariety) {
  struct Case {
    const char* name;
    int agents;
    size_t min_chars, max_chars;
  };
  // generative-agents: 300-800 SmolLM2 tokens measured; agent-society: 80-200 tokens.
  for (const Case& c : {Case{"generative-agents", 200, 1400, 2850}, Case{"agent-society", 1000, 380, 680}}) {
    for (uint64_t seed : {1, 2, 3}) {
      auto w = test_workload(c.name, c.agents, seed);
      const auto turns = w->round(0);
      std::set<std::string> distinct;
      size_t shortest = SIZE_MAX, longest = 0;
      for (const AgentTurn& t : turns) {
        EXPECT_GE(t.private_end, c.min_chars) << c.name << " agent " << t.agent;
        EXPECT_LE(t.private_end, c.max_chars) << c.name << " agent " << t.agent;
        shortest = std::min(shortest, t.private_end);
        longest = std::max(longest, t.private_end);
        distinct.insert(private_part(t));
      }
      EXPECT_EQ(distinct.size(), turns.size()) << c.name;
      // Lengths vary per agent across most of the range.
      EXPECT_GT(longest - shortest, (c.max_chars - c.min_chars) / 2) << c.name;
    }
  }
}

TEST(WorkloadTown, PersonaNamesTheAgentAndEndsWithItsName) {
  auto w = test_workload("generative-agents", 6, 9);
  const auto turns = w->round(0);
  const auto cast = text::make_cast(9, 6);
  for (const AgentTurn& t : turns) {
    const std::string& full = cast[static_cast<size_t>(t.agent)].full;
    EXPECT_NE(private_part(t).find("Name: " + full + "\n"), std::string::npos);
    EXPECT_NE(private_part(t).find("Relationships:\n- "), std::string::npos);
    EXPECT_NE(private_part(t).find("Memories (oldest first):\n- "), std::string::npos);
    EXPECT_TRUE(ends_with(t.prompt, "\n" + full + ":"));
    EXPECT_EQ(t.max_tokens, 60);
    EXPECT_EQ(t.min_tokens, 30);
  }
}

TEST(WorkloadTown, DigestIsSharedByEveryAgentAndFeedsOnReplies) {
  auto w = test_workload("generative-agents", 25, 4);
  const auto cast = text::make_cast(4, 25);
  const Rounds rounds = play(*w, [](int r, int agent) {
    return agent == 3 ? "  first line \n second line" : canned_reply(r, agent);
  });
  ASSERT_EQ(rounds.size(), 3u);
  for (size_t r = 0; r < rounds.size(); ++r) {
    const std::string digest = shared_part(rounds[r][0]);
    EXPECT_FALSE(digest.empty());
    for (const AgentTurn& t : rounds[r]) {
      EXPECT_EQ(shared_part(t), digest) << "round " << r << " agent " << t.agent;
      // The private prefix stays the same from round to round.
      EXPECT_EQ(private_part(t), private_part(rounds[0][static_cast<size_t>(t.agent)]));
    }
    if (r == 0) {
      EXPECT_TRUE(starts_with(digest, "=== Announcement in the town square of ")) << digest;
      continue;
    }
    EXPECT_NE(digest, shared_part(rounds[r - 1][0]));
    // Every agent's message of the previous round, in agent order, cleaned.
    size_t pos = 0;
    for (int i = 0; i < 25; ++i) {
      const std::string msg = i == 3 ? "first line" : canned_reply(static_cast<int>(r) - 1, i);
      const std::string line = "\n" + cast[static_cast<size_t>(i)].full + ": " + msg + "\n";
      const size_t at = digest.find(line, pos);
      ASSERT_NE(at, std::string::npos) << line;
      pos = at + 1;
    }
    EXPECT_EQ(digest.find("second line"), std::string::npos);
  }
}

TEST(WorkloadTown, AgentSocietyDigestQuotesADeterministicCappedSubset) {
  WorkloadOptions o;
  o.n_agents = 100;
  o.seed = 21;
  o.digest_messages = 32;
  auto a = std::move(make_workload("agent-society", o).value());
  auto b = std::move(make_workload("agent-society", o).value());
  const Rounds ra = play(*a), rb = play(*b);
  for (size_t r = 1; r < ra.size(); ++r) {
    const std::string digest = shared_part(ra[r][0]);
    for (const AgentTurn& t : ra[r]) ASSERT_EQ(shared_part(t), digest);
    EXPECT_EQ(digest, shared_part(rb[r][0]));
    EXPECT_NE(digest.find("(100 residents spoke; 32 of their messages, picked at random, follow.)\n"), std::string::npos);
    int quoted = 0, last_agent = -1;
    for (int i = 0; i < 100; ++i) {
      if (digest.find(": " + canned_reply(static_cast<int>(r) - 1, i) + "\n") != std::string::npos) {
        ++quoted;
        EXPECT_GT(i, last_agent);
        last_agent = i;
      }
    }
    EXPECT_EQ(quoted, 32);
    EXPECT_EQ(ra[r][0].max_tokens, 40);
    EXPECT_EQ(ra[r][0].min_tokens, 15);
  }
  EXPECT_NE(shared_part(ra[1][0]), shared_part(ra[2][0]));

  o.digest_messages = 5;
  auto small = std::move(make_workload("agent-society", o).value());
  const Rounds rs = play(*small);
  EXPECT_NE(shared_part(rs[1][0]).find("(100 residents spoke; 5 of their messages"), std::string::npos);
}

TEST(WorkloadDebate, TranscriptOfEachRoundExtendsThePreviousOne) {
  auto w = test_workload("debate", 6, 8, 5);
  const auto cast = text::make_cast(8, 6);
  const Rounds rounds = play(*w);
  ASSERT_EQ(rounds.size(), 5u);
  for (size_t r = 0; r < rounds.size(); ++r) {
    const std::string transcript = shared_part(rounds[r][0]);
    EXPECT_TRUE(starts_with(transcript, "Debate transcript. Motion: \""));
    EXPECT_EQ(count_lines_starting(transcript, "Round "), static_cast<int>(r) * 6);
    for (const AgentTurn& t : rounds[r]) {
      const std::string& who = cast[static_cast<size_t>(t.agent)].full;
      EXPECT_EQ(shared_part(t), transcript);
      EXPECT_TRUE(ends_with(t.prompt, "\nRound " + std::to_string(r + 1) + " \xE2\x80\x94 " + who + ":"));
      EXPECT_NE(t.prompt.find(who + ", give your argument for round " + std::to_string(r + 1)), std::string::npos);
      EXPECT_EQ(t.max_tokens, 60);
      EXPECT_EQ(t.min_tokens, 25);
      if (r == 0) continue;
      // The agent's previous prompt, up to the old transcript end, is a prefix of this one.
      const AgentTurn& before = rounds[r - 1][static_cast<size_t>(t.agent)];
      EXPECT_TRUE(starts_with(t.prompt, before.prompt.substr(0, before.shared_end)));
      EXPECT_GT(t.shared_end, before.shared_end);
      const std::string added = t.prompt.substr(before.shared_end, t.shared_end - before.shared_end);
      for (int i = 0; i < 6; ++i) {
        const std::string line = "Round " + std::to_string(r) + " \xE2\x80\x94 " + cast[static_cast<size_t>(i)].full +
                                 ": " + canned_reply(static_cast<int>(r) - 1, i) + "\n";
        EXPECT_NE(added.find(line), std::string::npos) << line;
      }
    }
  }
}

TEST(WorkloadDebate, RoleCardsTakeBothSides) {
  auto w = test_workload("debate", 8, 2);
  const auto turns = w->round(0);
  int for_side = 0, against = 0;
  for (const AgentTurn& t : turns) {
    const std::string card = private_part(t);
    EXPECT_GE(card.size(), 600u);
    EXPECT_LE(card.size(), 1300u);
    for_side += card.find(" argues FOR the motion") != std::string::npos;
    against += card.find(" argues AGAINST the motion") != std::string::npos;
  }
  EXPECT_EQ(for_side, 4);
  EXPECT_EQ(against, 4);
}

TEST(WorkloadChain, PlannerThenExecutorsOverAGrowingSharedContext) {
  auto w = test_workload("chain", 5, 3);
  ASSERT_EQ(w->n_rounds(), 5);
  const Rounds rounds = play(*w, [](int r, int agent) {
    return r == 0 ? "\n1. Audit the data\n2. Build the import\n\n3. Pilot\n4. Roll out" : canned_reply(r, agent);
  });
  const std::string brief = shared_part(rounds[0][0]);
  EXPECT_TRUE(starts_with(brief, "PROJECT BRIEF: "));
  EXPECT_GE(brief.size(), 6000u);
  EXPECT_LE(brief.size(), 9000u);
  for (size_t r = 0; r < rounds.size(); ++r) {
    ASSERT_EQ(rounds[r].size(), 1u);
    const AgentTurn& t = rounds[r][0];
    EXPECT_EQ(t.agent, static_cast<int>(r));
    EXPECT_EQ(t.private_end, 0u);
    EXPECT_EQ(t.max_tokens, r == 0 ? 80 : 60);
    EXPECT_TRUE(starts_with(t.prompt, brief));
    EXPECT_TRUE(ends_with(t.prompt, r == 0 ? "\nPlanner:" : "\nExecutor " + std::to_string(r) + ":"));
    if (r == 0) continue;
    const AgentTurn& before = rounds[r - 1][0];
    EXPECT_TRUE(starts_with(t.prompt, before.prompt.substr(0, before.shared_end)));
    const std::string added = t.prompt.substr(before.shared_end, t.shared_end - before.shared_end);
    EXPECT_EQ(added, r == 1 ? "Planner: 1. Audit the data\n2. Build the import\n3. Pilot\n4. Roll out\n\n"
                            : "Executor " + std::to_string(r - 1) + ": " + canned_reply(static_cast<int>(r) - 1,
                                                                                          static_cast<int>(r) - 1) +
                                  "\n\n");
  }
}

// long-history-society: each prompt is the agent's whole life in the town so far, its previous prompt and
// its own answer first, with every earlier digest and answer marked as a piece of its own; the persona
// stays short, so the shared digests are most of the context after five rounds.
TEST(WorkloadTown, LongHistoryContextsAccumulateEveryRound) {
  auto w = test_workload("long-history-society", 40, 4);
  ASSERT_EQ(w->n_rounds(), 5);
  const Rounds rounds = play(*w);
  for (size_t r = 0; r < rounds.size(); ++r) {
    ASSERT_EQ(rounds[r].size(), 40u);
    for (size_t i = 0; i < rounds[r].size(); ++i) {
      const AgentTurn& t = rounds[r][i];
      EXPECT_EQ(t.earlier_pieces.size(), 2 * r);
      // Each earlier round: its digest (shared by every agent), then the agent's own answer.
      ASSERT_EQ(t.earlier_piece_shared.size(), t.earlier_pieces.size());
      for (size_t k = 0; k < t.earlier_piece_shared.size(); ++k) EXPECT_EQ(t.earlier_piece_shared[k], k % 2 == 0);
      size_t prev_end = 0;
      for (const auto& [b, e] : t.earlier_pieces) {  // ascending, disjoint, inside the private prefix
        EXPECT_LE(prev_end, b);
        EXPECT_LT(b, e);
        EXPECT_LE(e, t.private_end);
        EXPECT_EQ(t.prompt[e - 1], '\n');
        prev_end = e;
      }
      if (r == 0) {
        EXPECT_GE(t.private_end, 380u);
        EXPECT_LE(t.private_end, 660u);
        continue;
      }
      const AgentTurn& before = rounds[r - 1][i];
      std::string answer = " ";  // piecewise: g++ 12 raises a false -Wrestrict on " " + std::string + "\n"
      answer += canned_reply(int(r) - 1, t.agent);
      answer += '\n';
      EXPECT_EQ(t.prompt.substr(0, t.private_end), before.prompt + answer);
      // The pieces before: the last turn's, then its shared block and the answer.
      std::vector<std::pair<size_t, size_t>> want = before.earlier_pieces;
      want.emplace_back(before.private_end, before.shared_end);
      want.emplace_back(before.prompt.size(), before.prompt.size() + answer.size());
      EXPECT_EQ(t.earlier_pieces, want);
      // The shared block of this round is the same for every agent.
      EXPECT_EQ(shared_part(t), shared_part(rounds[r][0]));
    }
  }
  // After five rounds the digests (every round's shared block) are most of a context.
  for (const AgentTurn& t : rounds.back()) {
    size_t shared = t.shared_end - t.private_end;
    for (size_t k = 0; k < t.earlier_pieces.size(); ++k)
      if (t.earlier_piece_shared[k]) shared += t.earlier_pieces[k].second - t.earlier_pieces[k].first;
    EXPECT_GT(double(shared) / double(t.prompt.size()), 0.75) << "agent " << t.agent;
  }
}

TEST(WorkloadProtocolDeathTest, RecordChecksRoundAndReplyCount) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(test_workload("debate")->record(0, {"a", "b", "c", "d"}), "invariant failed");
  EXPECT_DEATH(
      {
        auto w = test_workload("debate");
        (void)w->round(0);
        w->record(0, {"a", "b", "c"});
      },
      "invariant failed");
  EXPECT_DEATH(
      {
        auto w = test_workload("chain");
        (void)w->round(0);
        w->record(1, {"a"});
      },
      "invariant failed");
  EXPECT_DEATH(
      {
        auto w = test_workload("generative-agents", 2);
        (void)w->round(1);
      },
      "invariant failed");
  EXPECT_DEATH(
      {
        auto w = test_workload("chain", 2);
        play(*w);
        (void)w->round(2);
      },
      "invariant failed");
}

TEST(WorkloadProtocol, AnEarlierRoundCanBeAskedForAgain) {
  auto w = test_workload("debate", 4, 6);
  const Rounds rounds = play(*w);
  for (size_t r = 0; r < rounds.size(); ++r) {
    const auto again = w->round(static_cast<int>(r));
    for (size_t i = 0; i < again.size(); ++i) EXPECT_EQ(again[i].prompt, rounds[r][i].prompt);
  }
}

// bench-agents --sample: k distinct agents in range, fixed by the seed (mt19937_64's sequence is the
// standard's, so these ids hold on every platform), different for another seed; every agent when k
// does not sample.
TEST(BenchAgentsSample, SeededDistinctInRangeAndWholeWhenNotSampling) {
  const std::set<int> a = sample_of_agents(200, 20, 1);
  ASSERT_EQ(a.size(), 20u);
  EXPECT_GE(*a.begin(), 0);
  EXPECT_LT(*a.rbegin(), 200);
  EXPECT_EQ(sample_of_agents(200, 20, 1), a);
  EXPECT_NE(sample_of_agents(200, 20, 2), a);
  const std::set<int> small = sample_of_agents(200, 3, 1);
  EXPECT_EQ(small.size(), 3u);
  for (int k : {0, -1, 200, 250}) EXPECT_EQ(sample_of_agents(200, k, 1).size(), 200u) << k;
  EXPECT_TRUE(sample_of_agents(0, 5, 1).empty());
  // Every agent can be drawn: over many seeds each of 10 agents turns up in a sample of 2.
  std::set<int> seen;
  for (uint64_t seed = 0; seed < 200; ++seed)
    for (int i : sample_of_agents(10, 2, seed)) seen.insert(i);
  EXPECT_EQ(seen.size(), 10u);
}

}  // namespace
}  // namespace agentkv
