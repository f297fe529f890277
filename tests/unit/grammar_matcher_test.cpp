// The grammar builder's checks and the matcher: bytes, tokens that span grammar boundaries, the
// vocabulary trie's masks against a brute-force check of every token, completion and free text.
#include <gtest/gtest.h>

#include <random>

#include "engine/grammar.h"
#include "engine/grammar_matcher.h"

namespace agentkv {
namespace {

using B = GrammarBuilder;

// root ::= "{" digits "}" ; digits ::= [0-9]+
std::shared_ptr<const Grammar> braces_digits() {
  GrammarBuilder b;
  const uint32_t digits = b.plus(B::range('0', '9'));
  B::Seq s;
  B::append_literal(s, "{");
  s.push_back(B::ref(digits));
  B::append_literal(s, "}");
  const uint32_t root = b.rule("root", {s});
  auto g = b.build(root);
  EXPECT_TRUE(g.ok()) << g.error();
  return *g;
}

TEST(Grammar, RefusesLeftRecursionAndEmptyRules) {
  GrammarBuilder b;
  const uint32_t a = b.declare("a");
  b.add_alternative(a, {B::ref(a), B::byte('x')});
  auto g = b.build(a);
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.error().find("left-recursive"), std::string::npos) << g.error();

  GrammarBuilder c;
  const uint32_t opt = c.optional(B::byte('y'));
  const uint32_t r = c.declare("r");  // r ::= opt r 'x' : left-recursive through a nullable rule
  c.add_alternative(r, {B::ref(opt), B::ref(r), B::byte('x')});
  c.add_alternative(r, {B::byte('z')});
  EXPECT_FALSE(c.build(r).ok());

  GrammarBuilder d;
  const uint32_t empty = d.declare("nothing");
  EXPECT_FALSE(d.build(empty).ok());
}

TEST(GrammarMatcher, BytesCompleteAndContinue) {
  GrammarMatcher m(braces_digits(), nullptr);
  EXPECT_FALSE(m.complete());
  EXPECT_TRUE(m.can_continue());
  EXPECT_TRUE(m.accepts_bytes("{12"));
  EXPECT_FALSE(m.accepts_bytes("{}"));
  EXPECT_FALSE(m.accepts_bytes("{1a"));
  ASSERT_TRUE(m.advance_bytes("{1"));
  EXPECT_FALSE(m.advance_bytes("x"));  // refused: no change
  ASSERT_TRUE(m.advance_bytes("23}"));
  EXPECT_TRUE(m.complete());
  EXPECT_FALSE(m.can_continue());
  EXPECT_FALSE(m.accepts_bytes("}"));
}

TEST(GrammarMatcher, RepeatBoundsAndStarStayFlat) {
  GrammarBuilder b;
  const uint32_t r = b.repeat(B::byte('a'), 2, 4);
  GrammarMatcher m(b.build(r).value(), nullptr);
  EXPECT_FALSE(m.accepts_bytes("aaaaa"));
  ASSERT_TRUE(m.advance_bytes("a"));
  EXPECT_FALSE(m.complete());
  ASSERT_TRUE(m.advance_bytes("a"));
  EXPECT_TRUE(m.complete());
  EXPECT_TRUE(m.can_continue());
  ASSERT_TRUE(m.advance_bytes("aa"));
  EXPECT_TRUE(m.complete());
  EXPECT_FALSE(m.can_continue());

  // A long run of a star rule stays one state (right recursion does not grow the stacks).
  GrammarBuilder c;
  const uint32_t s = c.star(B::byte('b'));
  GrammarMatcher n(c.build(s).value(), nullptr);
  for (int i = 0; i < 10000; ++i) ASSERT_TRUE(n.advance_bytes("b"));
  EXPECT_TRUE(n.complete());
}

TEST(GrammarMatcher, AnyRestLiftsTheConstraint) {
  // root ::= "<call>" [0-9] | [^<] ANY*
  GrammarBuilder b;
  B::Seq call;
  B::append_literal(call, "<call>");
  call.push_back(B::range('0', '9'));
  ByteSet not_lt;
  not_lt.set();
  not_lt.reset('<');
  const uint32_t root = b.rule("root", {call, {B::bytes(not_lt), B::any_rest()}});
  GrammarMatcher m(b.build(root).value(), nullptr);
  EXPECT_FALSE(m.unconstrained());
  EXPECT_TRUE(m.accepts_bytes("<call>7"));
  EXPECT_FALSE(m.accepts_bytes("<callx"));
  ASSERT_TRUE(m.advance_bytes("hello <call> anything"));
  EXPECT_TRUE(m.unconstrained());
  EXPECT_TRUE(m.complete());
}

// A vocabulary with tokens that span the grammar's boundaries ("{1", "2}", "}") and tokens that
// fit nowhere; token 0 is the end of generation (no bytes).
std::shared_ptr<const TokenVocabulary> small_vocab() {
  return TokenVocabulary::from_pieces({"", "{", "}", "1", "2", "{1", "2}", "12", "a", "{a", "}}", " ", "1}", "", "{12}"},
                                      {0});
}

TEST(GrammarMatcher, TokenMasksMatchBruteForce) {
  auto vocab = small_vocab();
  GrammarMatcher m(braces_digits(), vocab);
  std::vector<uint8_t> mask;
  auto brute = [&](GrammarMatcher& g) {
    std::vector<uint8_t> want(size_t(vocab->n_vocab()), 0);
    for (int32_t t = 0; t < vocab->n_vocab(); ++t) want[size_t(t)] = g.allows(t) ? 1 : 0;
    return want;
  };
  for (const char* step : {"{1", "2", "12", "1}"}) {
    m.fill_mask(mask);
    EXPECT_EQ(mask, brute(m)) << "before " << step;
    const int32_t t = [&] {
      for (int32_t i = 0; i < vocab->n_vocab(); ++i)
        if (vocab->bytes(i) == step) return i;
      return -1;
    }();
    ASSERT_GE(t, 0);
    ASSERT_TRUE(m.accept(t)) << step;
  }
  EXPECT_TRUE(m.complete());
  m.fill_mask(mask);
  EXPECT_EQ(mask, brute(m));
  EXPECT_EQ(mask[0], 1);  // only the end of generation is left
  for (size_t t = 1; t < mask.size(); ++t) EXPECT_EQ(mask[t], 0) << t;
  EXPECT_FALSE(m.allows(13));  // a token with no bytes is never allowed
}

TEST(GrammarMatcher, BudgetLeavesOnlyTokensThatCanStillClose) {
  auto vocab = small_vocab();
  GrammarMatcher m(braces_digits(), vocab);
  EXPECT_EQ(m.min_completion(), 3u);  // "{" digit "}"
  ASSERT_TRUE(m.advance_bytes("{1"));
  EXPECT_EQ(m.min_completion(), 1u);
  auto id = [&](std::string_view piece) {
    for (int32_t i = 1; i < vocab->n_vocab(); ++i)
      if (vocab->bytes(i) == piece) return i;
    return -1;
  };
  EXPECT_TRUE(m.allows(id("2"), 1));   // then "}" still fits
  EXPECT_FALSE(m.allows(id("2"), 0));  // nothing may follow it: only a closing token
  EXPECT_TRUE(m.allows(id("2}"), 0));
  EXPECT_TRUE(m.allows(id("}"), 0));
  std::vector<uint8_t> mask;
  m.fill_mask(mask, 0);
  for (int32_t t = 0; t < vocab->n_vocab(); ++t)
    EXPECT_EQ(mask[size_t(t)] != 0, m.allows(t, 0)) << vocab->bytes(t);
  m.fill_mask(mask);  // no budget: the cached mask of a budget-limited walk is not reused
  EXPECT_TRUE(mask[size_t(id("2"))]);
  m.fill_mask(mask, 0);
  EXPECT_FALSE(mask[size_t(id("2"))]);
}

// root ::= "{\"name\": \"" [a-z]+ "\"}": the shape of a one-argument tool call.
std::shared_ptr<const Grammar> name_object() {
  GrammarBuilder b;
  B::Seq s;
  B::append_literal(s, "{\"name\": \"");
  s.push_back(B::ref(b.plus(B::range('a', 'z'))));
  B::append_literal(s, "\"}");
  auto g = b.build(b.rule("root", {s}));
  EXPECT_TRUE(g.ok()) << g.error();
  return *g;
}

TEST(GrammarMatcher, ClosingPlanCutsTheShortestAnswerIntoFewestTokens) {
  // Every byte has a token, and a few longer pieces cover the answer's fixed parts.
  std::vector<std::string> pieces{""};
  for (char c : std::string("{}\":, nameb")) pieces.push_back(std::string(1, c));
  for (const char* p : {"{\"", "name", "\": \"", "\"}", "ab", "na"}) pieces.push_back(p);
  auto vocab = TokenVocabulary::from_pieces(pieces, {0});
  auto id = [&](std::string_view piece) {
    for (int32_t i = 1; i < vocab->n_vocab(); ++i)
      if (vocab->bytes(i) == piece) return i;
    return -1;
  };
  GrammarMatcher m(name_object(), vocab);
  EXPECT_EQ(m.min_completion(), 13u);  // {"name": "a"}
  EXPECT_EQ(m.min_completion_tokens(), 5u);
  std::string text;
  for (int32_t t : m.closing_plan()) text += vocab->bytes(t);
  EXPECT_EQ(text, "{\"name\": \"a\"}");
  // A token fits when the plan after it does: {" then name, ": ", a, "} (4); { then 5 more.
  EXPECT_TRUE(m.allows(id("{\""), 4));
  EXPECT_FALSE(m.allows(id("{\""), 3));
  EXPECT_FALSE(m.allows(id("{"), 4));
  EXPECT_TRUE(m.allows(id("{"), 5));
  std::vector<uint8_t> mask;
  for (uint32_t budget : {3u, 4u, 5u, 12u, 13u}) {
    m.fill_mask(mask, budget);
    for (int32_t t = 0; t < vocab->n_vocab(); ++t)
      EXPECT_EQ(mask[size_t(t)] != 0, m.allows(t, budget)) << "'" << vocab->bytes(t) << "' at " << budget;
  }
  ASSERT_TRUE(m.advance_bytes("{\"name\": \"ab"));
  EXPECT_EQ(m.min_completion_tokens(), 1u);  // "}
  ASSERT_TRUE(m.advance_bytes("\"}"));
  EXPECT_TRUE(m.complete());
  EXPECT_EQ(m.min_completion_tokens(), 0u);
  EXPECT_TRUE(m.closing_plan().empty());
}

TEST(GrammarMatcher, NoPlanWhereAByteHasNoToken) {
  auto vocab = TokenVocabulary::from_pieces({"", "{", "\"", "name"}, {0});  // no ':' anywhere
  GrammarMatcher m(name_object(), vocab);
  EXPECT_EQ(m.min_completion_tokens(), GrammarMatcher::kNoBudget);
  EXPECT_TRUE(m.closing_plan().empty());
}

// value ::= [0-9]+ | "[" (value ("," value)*)? "]"
std::shared_ptr<const Grammar> nested_brackets() {
  GrammarBuilder b;
  const uint32_t value = b.declare("value");
  const uint32_t digits = b.plus(B::range('0', '9'));
  const uint32_t more = b.declare("more");
  b.add_alternative(more, {B::byte(','), B::ref(value), B::ref(more)});
  b.add_alternative(more, {});
  const uint32_t items = b.rule("items", {{B::ref(value), B::ref(more)}, {}});
  b.add_alternative(value, {B::ref(digits)});
  b.add_alternative(value, {B::byte('['), B::ref(items), B::byte(']')});
  auto g = b.build(value);
  EXPECT_TRUE(g.ok()) << g.error();
  return *g;
}

// Token 0 (no bytes) ends generation; then, with `bytes`, each byte of the alphabet; then `n` random
// strings over it of min_len..max_len bytes.
std::shared_ptr<const TokenVocabulary> random_vocab(std::mt19937& rng, const std::string& alphabet, bool bytes, int n,
                                                    int min_len, int max_len) {
  std::vector<std::string> pieces{""};
  if (bytes)
    for (char c : alphabet) pieces.push_back(std::string(1, c));
  for (int i = 0; i < n; ++i) {
    std::string p;
    const int len = min_len + int(rng() % uint32_t(max_len - min_len + 1));
    for (int k = 0; k < len; ++k) p += alphabet[rng() % alphabet.size()];
    pieces.push_back(p);
  }
  return TokenVocabulary::from_pieces(pieces, {0});
}

TEST(GrammarMatcher, RandomVocabularyMasksMatchBruteForce) {
  // Random byte strings over a small alphabet against a grammar of nested brackets and digits.
  std::mt19937 rng(7);
  auto vocab = random_vocab(rng, "[]0129, ", false, 400, 1, 5);
  auto g = nested_brackets();
  for (int trial = 0; trial < 20; ++trial) {
    GrammarMatcher m(g, vocab);
    std::vector<uint8_t> mask;
    for (int step = 0; step < 30; ++step) {
      m.fill_mask(mask);
      std::vector<int32_t> ok;
      for (int32_t t = 0; t < vocab->n_vocab(); ++t) {
        ASSERT_EQ(mask[size_t(t)] != 0, m.allows(t)) << "token '" << vocab->bytes(t) << "'";
        if (mask[size_t(t)] && t != 0) ok.push_back(t);
      }
      if (ok.empty()) break;
      ASSERT_TRUE(m.accept(ok[rng() % ok.size()]));
    }
  }
}

TEST(GrammarMatcher, ClosingPlansFollowThemselvesAndBudgetMasksMatchBruteForce) {
  // Nested brackets and digits over random pieces (each byte also a token): from random states, the
  // plan's first token leads to a state whose plan is the rest (so a budget that fits a plan always
  // leaves a token), and budget-limited masks equal token-by-token checks.
  std::mt19937 rng(5);
  auto vocab = random_vocab(rng, "[]0129,", true, 300, 2, 5);
  auto g = nested_brackets();
  int shorter = 0;
  for (int trial = 0; trial < 20; ++trial) {
    GrammarMatcher m(g, vocab);
    std::vector<uint8_t> mask;
    for (int step = 0; step < 30 && !m.complete(); ++step) {
      const std::vector<int32_t> plan = m.closing_plan();
      ASSERT_EQ(m.min_completion_tokens(), plan.size());
      ASSERT_LE(plan.size(), m.min_completion());
      shorter += int(plan.size() < m.min_completion());
      const uint32_t budget = uint32_t(rng() % (plan.size() + 2));
      m.fill_mask(mask, budget);
      for (int32_t t = 0; t < vocab->n_vocab(); ++t)
        ASSERT_EQ(mask[size_t(t)] != 0, m.allows(t, budget)) << "token '" << vocab->bytes(t) << "' at " << budget;
      GrammarMatcher after = m;
      ASSERT_TRUE(after.accept(plan[0]));
      ASSERT_EQ(after.min_completion_tokens(), plan.size() - 1);
      // On at random, sometimes deeper (an opening bracket), sometimes along the plan.
      std::vector<int32_t> ok;
      for (int32_t t = 1; t < vocab->n_vocab(); ++t)
        if (m.allows(t)) ok.push_back(t);
      ASSERT_FALSE(ok.empty());
      ASSERT_TRUE(m.accept(rng() % 3 ? ok[rng() % ok.size()] : plan[0]));
    }
  }
  EXPECT_GT(shorter, 0);
}

TEST(GrammarMatcher, ChainsOfOptionalGroupsStayCheap) {
  // (a*b*)? forty times: every byte can be read by any group, and every group can be skipped. Each
  // step expands each (position, return) pair once, so this is fast and small, not 2^40 paths.
  GrammarBuilder b;
  const uint32_t as = b.star(B::byte('a')), bs = b.star(B::byte('b'));
  const uint32_t group = b.optional(B::ref(b.rule("ab", {{B::ref(as), B::ref(bs)}})));
  B::Seq all;
  for (int i = 0; i < 40; ++i) all.push_back(B::ref(group));
  GrammarMatcher m(b.build(b.rule("root", {all})).value(), nullptr);
  // "b" then "aab" again and again: one group each, 34 of the 40.
  for (int i = 0; i < 100; ++i) ASSERT_TRUE(m.advance_bytes(i % 3 ? "a" : "b")) << i;
  EXPECT_TRUE(m.complete());
  EXPECT_FALSE(m.overflowed());
}

TEST(GrammarMatcher, LongAnswersCompactTheirStates) {
  // [0-9]{0,50000}: every position is a state of its own; past kCompactStates the caches are dropped
  // and matching goes on from the current state, to the exact bound.
  GrammarBuilder b;
  const uint32_t r = b.repeat(B::range('0', '9'), 0, 50000);
  GrammarMatcher m(b.build(r).value(), nullptr);
  for (int i = 0; i < 50000; ++i) ASSERT_TRUE(m.advance_bytes("7")) << i;
  EXPECT_TRUE(m.complete());
  EXPECT_FALSE(m.can_continue());
  EXPECT_FALSE(m.accepts_bytes("7"));
  EXPECT_FALSE(m.overflowed());
}

TEST(GrammarMatcher, DeeplyNestedAnswersCompactWithoutRecursion) {
  // [[[[...]]]] 40000 deep: past kCompactStates the stacks, 40000 nodes tall, are renumbered.
  GrammarBuilder b;
  const uint32_t value = b.declare("value");
  b.add_alternative(value, {B::byte('['), B::ref(value), B::byte(']')});
  b.add_alternative(value, {B::byte('0')});
  GrammarMatcher m(b.build(value).value(), nullptr);
  constexpr int kDepth = 40000;
  for (int i = 0; i < kDepth; ++i) ASSERT_TRUE(m.advance_bytes("[")) << i;
  EXPECT_EQ(m.min_completion(), uint32_t(kDepth) + 1);
  ASSERT_TRUE(m.advance_bytes("0"));
  for (int i = 0; i < kDepth; ++i) ASSERT_TRUE(m.advance_bytes("]")) << i;
  EXPECT_TRUE(m.complete());
  EXPECT_FALSE(m.can_continue());
}

}  // namespace
}  // namespace agentkv
