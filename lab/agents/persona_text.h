// Deterministic text for the multi-agent workloads (private to lab/agents/): a PRNG of our own, so the
// same seed gives the same bytes with any standard library, plus the town cast, personas, memories
// and announcements that generative-agents and agent-society share.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace agentkv::text {

// splitmix64: tiny, full-period, and its output is fixed by its definition (std:: distributions are
// not, so nothing here uses them).
class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint64_t next();
  // Uniform integer in [lo, hi] (inclusive).
  int uniform(int lo, int hi);
  // True with probability percent / 100.
  bool chance(int percent) { return uniform(0, 99) < percent; }
  template <class T>
  const T& pick(const std::vector<T>& v) {
    return v[static_cast<size_t>(uniform(0, static_cast<int>(v.size()) - 1))];
  }
  template <class T>
  void shuffle(std::vector<T>& v) {
    for (size_t i = v.size(); i > 1; --i) std::swap(v[i - 1], v[static_cast<size_t>(uniform(0, static_cast<int>(i) - 1))]);
  }
  // k distinct indices from [0, n), in the order drawn.
  std::vector<int> sample(int n, int k);

 private:
  uint64_t state_;
};

// Indices of [0, n) in shuffled order, without repeats until all were drawn, then a new shuffle:
// for picking templates so that neighbouring lines differ.
class Deck {
 public:
  Deck(Rng& rng, int n) : rng_(rng), n_(n) {}
  int next();

 private:
  Rng& rng_;
  int n_;
  std::vector<int> order_;
  size_t pos_ = 0;
};

// Independent streams: content for (seed, what, index) does not depend on what else was generated.
uint64_t derive_seed(uint64_t seed, uint64_t stream, uint64_t index = 0);

// Streams used by more than one file.
enum Stream : uint64_t {
  kStreamCast = 1,
  kStreamTown,
  kStreamProfile,
  kStreamDigest,
  kStreamDebate,
  kStreamRole,
  kStreamBrief,
};

struct Person {
  std::string first;
  std::string full;  // "First Last", unique within a cast
};

// n people with distinct full names, drawn from the seed.
std::vector<Person> make_cast(uint64_t seed, int n);

// "March 14" for a day of a 365-day year (0 = January 1; wraps).
std::string format_date(int day_of_year);

struct Town {
  std::string name;
  int today = 0;  // day of year of round 0
};
Town make_town(uint64_t seed);

// The opening announcement of round 0: the same text for every agent, picked by the seed.
std::string town_announcement(uint64_t seed, const Town& town);

// A resident's private persona and memory prefix. Its length is drawn from [min_chars, max_chars]
// per agent; compact profiles (agent-society) hold a short persona and a few memories.
struct ProfileShape {
  size_t min_chars = 0;
  size_t max_chars = 0;
  bool compact = false;
};
std::string resident_profile(const std::vector<Person>& cast, int agent, const Town& town,
                             uint64_t seed, const ProfileShape& shape);

// Joins items as "a, b and c".
std::string join_list(const std::vector<std::string>& items);

// Replaces each {key} of tmpl by its value; an unknown key is a bug in the template lists.
using TemplateVars = std::vector<std::pair<std::string_view, std::string>>;
std::string fill_template(std::string_view tmpl, const TemplateVars& vars);

// The chain workload's long shared document (~1500-2500 tokens): background, team, goals,
// requirements, constraints, two data tables, risks and a dated project log.
std::string project_brief(uint64_t seed);

}  // namespace agentkv::text
