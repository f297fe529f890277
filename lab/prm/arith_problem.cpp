#include "lab/prm/arith_problem.h"

#include <array>
#include <string_view>

#include "util/status.h"

namespace agentkv::prm {
namespace {

// splitmix64: tiny, well mixed and fully specified, so problems are identical across compilers.
class SplitMix {
 public:
  explicit SplitMix(uint64_t seed) : s_(seed) {}
  uint64_t next() {
    uint64_t z = (s_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  // Uniform enough in [lo, hi] for these tiny ranges (modulo bias < 2^-50).
  int64_t range(int64_t lo, int64_t hi) { return lo + int64_t(next() % uint64_t(hi - lo + 1)); }
  template <class T, size_t N>
  const T& pick(const std::array<T, N>& a) { return a[next() % N]; }

 private:
  uint64_t s_;
};

constexpr std::array<std::string_view, 10> kNames = {"Tom", "Anna", "Ben", "Mia", "Sam",
                                                      "Lucy", "Max", "Emma", "Leo", "Nora"};
constexpr std::array<std::string_view, 8> kItems = {"apples", "marbles", "stickers", "books",
                                                    "coins", "pencils", "cookies", "cards"};

struct Builder {
  ArithProblem& p;
  int64_t value;
  void step(int64_t lhs, char op, int64_t rhs, int64_t result) {
    p.reference.push_back({lhs, op, rhs, result});
    value = result;
  }
  void say(const std::string& sentence) { p.text += (p.text.empty() ? "" : " ") + sentence; }
  void state(int64_t q) { p.quantities.push_back(q); }
};

}  // namespace

uint64_t arith_seed(ArithSplit split, uint64_t index) {
  AGENTKV_CHECK(index < (uint64_t(1) << 32));
  return split == ArithSplit::kTrain ? index : (uint64_t(1) << 32) + index;
}

ArithProblem generate_arith_problem(uint64_t seed) { return generate_arith_problem(seed, ArithShape{}); }

ArithProblem generate_arith_problem(uint64_t seed, const ArithShape& shape) {
  AGENTKV_CHECK(1 <= shape.min_ops && shape.min_ops <= shape.max_ops && shape.max_ops <= 3);
  ArithProblem p;
  p.seed = seed;
  SplitMix rng(seed);
  const std::string name(rng.pick(kNames));
  const std::string item(rng.pick(kItems));
  const int64_t start = rng.range(3, 20);
  Builder b{p, start};
  b.say(name + " has " + std::to_string(start) + " " + item + ".");
  b.state(start);
  const int n_ops = int(rng.range(shape.min_ops, shape.max_ops));
  for (int i = 0; i < n_ops; ++i) {
    const int64_t v = b.value;
    // Kinds: 0 gets more, 1 gives away, 2 buys packs (two steps: a product, then a sum),
    // 3 multiplies, 4 shares equally. Kinds whose result would leave the range are skipped.
    int kind = int(rng.range(0, 4));
    if (kind == 1 && v < 2) kind = 0;
    if (kind == 3 && v > 60) kind = 1;
    if (kind == 4) {
      // Shares equally among k people (k divides v, k >= 2) and keeps one share.
      int64_t k = 0;
      for (int64_t c : {2, 3, 4, 5})
        if (v % c == 0 && v / c >= 2 && (k == 0 || rng.range(0, 1) == 1)) k = c;
      if (k == 0) kind = 0;
      else {
        b.say(name + " shares the " + item + " equally among " + std::to_string(k) +
              " friends and keeps one share.");
        b.state(k);
        b.step(v, '/', k, v / k);
        continue;
      }
    }
    if (kind == 0) {
      const int64_t n = rng.range(2, 15);
      b.say(name + " gets " + std::to_string(n) + " more " + item + ".");
      b.state(n);
      b.step(v, '+', n, v + n);
    } else if (kind == 1) {
      const int64_t n = rng.range(1, v - 1);
      b.say(name + " gives away " + std::to_string(n) + " " + item + ".");
      b.state(n);
      b.step(v, '-', n, v - n);
    } else if (kind == 2) {
      const int64_t packs = rng.range(2, 5);
      const int64_t per = rng.range(2, 9);
      b.say(name + " buys " + std::to_string(packs) + " packs with " + std::to_string(per) + " " + item +
            " in each pack.");
      b.state(packs);
      b.state(per);
      b.step(packs, '*', per, packs * per);
      b.step(v, '+', packs * per, v + packs * per);
    } else {
      const int64_t f = rng.range(2, 3);
      b.say("Then the number of " + item + " " + name + " has becomes " + (f == 2 ? "twice" : "three times") +
            " as large.");
      // "twice" / "three times" state the factor in words; the checker accepts it as a quantity.
      b.state(f);
      b.step(v, '*', f, v * f);
    }
  }
  b.say("How many " + item + " does " + name + " have now?");
  p.answer = b.value;
  return p;
}

}  // namespace agentkv::prm
