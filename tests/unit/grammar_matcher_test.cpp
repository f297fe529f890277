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

TEST(GrammarMatcher, RandomVocabularyMasksMatchBruteForce) {
  // Random byte strings over a small alphabet against a grammar of nested brackets and digits.
  std::mt19937 rng(7);
  const std::string alphabet = "[]0129, ";
  std::vector<std::string> pieces{""};
  for (int i = 0; i < 400; ++i) {
    std::string p;
    const int len = 1 + int(rng() % 5);
    for (int k = 0; k < len; ++k) p += alphabet[rng() % alphabet.size()];
    pieces.push_back(p);
  }
  auto vocab = TokenVocabulary::from_pieces(pieces, {0});
  // value ::= [0-9]+ | "[" (value ("," value)*)? "]"
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
  ASSERT_TRUE(g.ok()) << g.error();
  for (int trial = 0; trial < 20; ++trial) {
    GrammarMatcher m(*g, vocab);
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
