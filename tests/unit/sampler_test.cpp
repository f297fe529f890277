// The sampler without a model: greedy and sampled picks, the filters, the penalties and the logit bias.
#include "engine/sampler.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <random>
#include <vector>

namespace agentkv {
namespace {

std::vector<float> logits_of(std::initializer_list<float> v) { return std::vector<float>(v); }

TEST(Sampler, GreedyPicksArgmaxLowestIdOnTies) {
  SamplingParams p;
  Sampler s(p);
  auto l = logits_of({1.0f, 3.0f, 3.0f, -2.0f});
  EXPECT_EQ(s.sample(l.data(), 4, {}), 1);
}

TEST(Sampler, TopKOneIsGreedyAtAnyTemperature) {
  SamplingParams p;
  p.temperature = 5.0f;
  p.top_k = 1;
  Sampler s(p);
  for (int i = 0; i < 50; ++i) {
    auto l = logits_of({0.1f, 0.2f, 2.0f, 0.3f});
    EXPECT_EQ(s.sample(l.data(), 4, {}), 2);
  }
}

TEST(Sampler, SameSeedSameTokens) {
  SamplingParams p;
  p.temperature = 1.0f;
  p.seed = 1234;
  Sampler a(p), b(p);
  for (int i = 0; i < 100; ++i) {
    auto la = logits_of({0.0f, 0.5f, 1.0f, 0.2f, 0.9f});
    auto lb = la;
    EXPECT_EQ(a.sample(la.data(), 5, {}), b.sample(lb.data(), 5, {}));
  }
}

TEST(Sampler, TemperatureSamplingFollowsSoftmax) {
  SamplingParams p;
  p.temperature = 1.0f;
  p.seed = 7;
  Sampler s(p);
  std::map<int, int> counts;
  const int n = 20000;
  for (int i = 0; i < n; ++i) {
    auto l = logits_of({0.0f, std::log(3.0f)});  // probabilities 1/4, 3/4
    counts[s.sample(l.data(), 2, {})]++;
  }
  EXPECT_NEAR(double(counts[1]) / n, 0.75, 0.02);
}

TEST(Sampler, TopPKeepsSmallestSetReachingP) {
  SamplingParams p;
  p.temperature = 1.0f;
  p.top_p = 0.5f;  // probabilities ~0.64, 0.24, 0.09, 0.03: only the first survives
  Sampler s(p);
  for (int i = 0; i < 200; ++i) {
    auto l = logits_of({3.0f, 2.0f, 1.0f, 0.0f});
    EXPECT_EQ(s.sample(l.data(), 4, {}), 0);
  }
}

TEST(Sampler, MinPDropsUnlikelyTokens) {
  SamplingParams p;
  p.temperature = 1.0f;
  p.min_p = 0.5f;  // keeps tokens with p >= 0.5 * p_max
  Sampler s(p);
  for (int i = 0; i < 300; ++i) {
    auto l = logits_of({2.0f, 2.0f - std::log(1.5f), -5.0f, -6.0f});
    const int t = s.sample(l.data(), 4, {});
    EXPECT_TRUE(t == 0 || t == 1);
  }
}

TEST(Sampler, RepetitionPenaltyDividesPositiveAndMultipliesNegative) {
  SamplingParams p;
  p.repetition_penalty = 2.0f;
  Sampler s(p);
  auto l = logits_of({3.0f, 2.0f, -1.0f});
  const std::vector<int32_t> hist = {0, 2};
  EXPECT_EQ(s.sample(l.data(), 3, hist), 1);  // 3/2 = 1.5 < 2
  EXPECT_FLOAT_EQ(l[0], 1.5f);
  EXPECT_FLOAT_EQ(l[2], -2.0f);
}

// Frequency and presence penalties follow OpenAI's formula over the tokens this sampler returned.
TEST(Sampler, OpenAiPenaltiesCountTheGeneratedTokens) {
  SamplingParams p;
  p.frequency_penalty = 0.5f;
  p.presence_penalty = 0.25f;
  Sampler s(p);
  const std::vector<int32_t> prompt = {2, 2, 2};  // the history (prompt) does not count
  auto l = logits_of({1.0f, 3.0f, 2.0f});
  EXPECT_EQ(s.sample(l.data(), 3, prompt), 1);
  EXPECT_FLOAT_EQ(l[2], 2.0f);
  l = logits_of({1.0f, 3.0f, 2.0f});
  EXPECT_EQ(s.sample(l.data(), 3, prompt), 1);  // 3 - 0.5 - 0.25 = 2.25 still leads
  EXPECT_FLOAT_EQ(l[1], 2.25f);
  l = logits_of({1.0f, 3.0f, 2.0f});
  EXPECT_EQ(s.sample(l.data(), 3, prompt), 2);  // 3 - 2 * 0.5 - 0.25 = 1.75 < 2
  EXPECT_FLOAT_EQ(l[1], 1.75f);
  EXPECT_FLOAT_EQ(l[0], 1.0f);
  l = logits_of({1.0f, 3.0f, 2.0f});
  EXPECT_EQ(s.sample(l.data(), 3, prompt), 1);  // 2 - 0.75 = 1.25 < 1.75
  EXPECT_FLOAT_EQ(l[2], 1.25f);
  EXPECT_FLOAT_EQ(l[1], 1.75f);
}

// A negative penalty rewards repeats; presence alone does not grow with the count.
TEST(Sampler, NegativePresencePenaltyRewardsOnceAToken) {
  SamplingParams p;
  p.presence_penalty = -1.0f;
  Sampler s(p);
  auto l = logits_of({2.0f, 1.5f});
  EXPECT_EQ(s.sample(l.data(), 2, {}), 0);
  for (int i = 0; i < 3; ++i) {
    l = logits_of({2.0f, 1.5f});
    EXPECT_EQ(s.sample(l.data(), 2, {}), 0);
    EXPECT_FLOAT_EQ(l[0], 3.0f);
    EXPECT_FLOAT_EQ(l[1], 1.5f);
  }
}

TEST(Sampler, LogitBiasBansAndForces) {
  SamplingParams p;
  p.logit_bias = {{1, -100.0f}};
  Sampler ban(p);
  auto l = logits_of({1.0f, 30.0f, 2.0f});
  EXPECT_EQ(ban.sample(l.data(), 3, {}), 2);
  EXPECT_FLOAT_EQ(l[1], -70.0f);
  p.logit_bias = {{0, 100.0f}};
  p.temperature = 1.0f;
  p.seed = 3;
  Sampler force(p);
  for (int i = 0; i < 200; ++i) {
    l = logits_of({-20.0f, 10.0f, 12.0f});
    EXPECT_EQ(force.sample(l.data(), 3, {}), 0);
  }
}

// The bias comes before the penalties, which see the biased logit.
TEST(Sampler, BiasThenPenalties) {
  SamplingParams p;
  p.logit_bias = {{0, 5.0f}};
  p.frequency_penalty = 2.0f;
  Sampler s(p);
  auto l = logits_of({0.0f, 4.0f});
  EXPECT_EQ(s.sample(l.data(), 2, {}), 0);  // 5 > 4
  EXPECT_FLOAT_EQ(l[0], 5.0f);
  l = logits_of({0.0f, 4.0f});
  EXPECT_EQ(s.sample(l.data(), 2, {}), 1);  // 5 - 2 = 3 < 4
  EXPECT_FLOAT_EQ(l[0], 3.0f);
}

// With every new field at its default the sampler leaves the logits untouched (greedy and sampled),
TEST(Sampler, NewFieldsOffChangeNothing) {
  const auto base = logits_of({0.3f, 1.0f, 0.9f, -0.2f, 0.95f});
  SamplingParams g;
  Sampler greedy(g);
  for (int i = 0; i < 5; ++i) {
    auto l = base;
    EXPECT_EQ(greedy.sample(l.data(), 5, {}), 1);
    EXPECT_EQ(l, base);
  }
  SamplingParams p;
  p.temperature = 0.8f;
  p.top_k = 3;
  p.seed = 99;
  Sampler a(p);
  for (int i = 0; i < 100; ++i) {
    auto l = base;
    const int32_t t = a.sample(l.data(), 5, {});
    EXPECT_EQ(l, base);
    EXPECT_TRUE(t == 1 || t == 2 || t == 4);  // top-k 3
  }
}

TEST(Sampler, ValidateChecksTheNewFields) {
  SamplingParams p;
  p.presence_penalty = 2.5f;
  EXPECT_NE(p.validate().error().find("presence_penalty"), std::string::npos);
  p = SamplingParams();
  p.frequency_penalty = -2.5f;
  EXPECT_NE(p.validate().error().find("frequency_penalty"), std::string::npos);
  p = SamplingParams();
  p.logit_bias = {{3, 1.0f}, {7, 101.0f}};
  EXPECT_NE(p.validate().error().find("logit_bias token id 7"), std::string::npos);
  p.logit_bias = {{7, 1.0f}, {3, 1.0f}};
  EXPECT_NE(p.validate().error().find("logit_bias token id 3"), std::string::npos);
  p.logit_bias = {{-1, 1.0f}};
  EXPECT_NE(p.validate().error().find("logit_bias token id -1"), std::string::npos);
  p.logit_bias = {{0, -100.0f}, {5, 100.0f}};
  EXPECT_TRUE(p.validate().ok());
}

TEST(Sampler, ValidateNamesTheBadField) {
  SamplingParams p;
  p.top_p = 0.0f;
  EXPECT_NE(p.validate().error().find("top_p"), std::string::npos);
  p = SamplingParams();
  p.temperature = -1.0f;
  EXPECT_NE(p.validate().error().find("temperature"), std::string::npos);
}

}  // namespace
}  // namespace agentkv

namespace agentkv {
namespace {

// Digits in brackets: root ::= "[" [0-9]{1,3} "]", over a vocabulary of pieces that fit or not.
std::shared_ptr<const Grammar> bracket_digits() {
  GrammarBuilder b;
  GrammarBuilder::Seq s{GrammarBuilder::byte('[')};
  s.push_back(GrammarBuilder::ref(b.repeat(GrammarBuilder::range('0', '9'), 1, 3)));
  s.push_back(GrammarBuilder::byte(']'));
  return b.build(b.rule("root", {s})).value();
}

// Pieces that fit the grammar, span its boundaries or fit nowhere; token 0 ends generation.
const std::vector<std::string> kBracketPieces{"", "[", "]", "1", "23", "[4", "5]", "x", "[]", "678", "9]", "]]", "a1"};

TEST(Sampler, GrammarGreedyIsTheArgmaxOfTheMask) {
  const std::vector<std::string>& pieces = kBracketPieces;
  auto vocab = TokenVocabulary::from_pieces(pieces, {0});
  std::mt19937 rng(3);
  std::normal_distribution<float> noise;
  for (int trial = 0; trial < 200; ++trial) {
    SamplingParams p;
    p.grammar = bracket_digits();
    Sampler s(p, vocab);
    GrammarMatcher ref(p.grammar, vocab);
    std::vector<int32_t> out;
    for (int step = 0; step < 8; ++step) {
      std::vector<float> l(pieces.size());
      for (float& v : l) v = noise(rng);
      // The reference: the argmax over the full mask (lowest id on ties).
      std::vector<uint8_t> mask;
      ref.fill_mask(mask);
      int32_t want = -1;
      for (int32_t t = 0; t < int32_t(l.size()); ++t)
        if (mask[size_t(t)] && (want < 0 || l[size_t(t)] > l[size_t(want)])) want = t;
      const int32_t got = s.sample(l.data(), int32_t(l.size()), out);
      ASSERT_EQ(got, want) << "trial " << trial << " step " << step;
      if (got < 0 || got == 0) break;  // nothing allowed, or the end
      ASSERT_TRUE(ref.accept(got));
      out.push_back(got);
      if (s.grammar_done()) break;
    }
  }
}

TEST(Sampler, GrammarSampledTokensAlwaysFitAndCloseInBudget) {
  const std::vector<std::string>& pieces = kBracketPieces;
  auto vocab = TokenVocabulary::from_pieces(pieces, {0});
  for (uint64_t seed = 0; seed < 100; ++seed) {
    SamplingParams p;
    p.grammar = bracket_digits();
    p.temperature = 1.5f;
    p.seed = seed;
    Sampler s(p, vocab);
    std::string text;
    std::vector<int32_t> out;
    const int budget = 3;  // "[", a digit, "]" at the least
    for (int step = 0; step < budget && !s.grammar_done(); ++step) {
      std::vector<float> l(pieces.size(), 0.0f);
      const int32_t t = s.sample(l.data(), int32_t(l.size()), out, budget - step);
      ASSERT_GT(t, 0) << "seed " << seed;
      text += pieces[size_t(t)];
      out.push_back(t);
    }
    EXPECT_TRUE(s.grammar()->complete()) << "seed " << seed << ": '" << text << "'";
  }
}

TEST(Sampler, GrammarClosesByItsPlanWhenTheBytesDoNotFit) {
  // root ::= "[" [0-9]{1,3} "]" again, but an answer written in few long pieces: random pieces over
  // the grammar's bytes (each byte also a token of its own), sampled at a budget from the closing
  // plan's length (fewer tokens than the shortest answer's bytes) up. Every answer closes in time.
  std::mt19937 rng(11);
  const std::string alphabet = "[]0123456789x";
  std::vector<std::string> pieces{""};
  for (char c : alphabet) pieces.push_back(std::string(1, c));
  for (int i = 0; i < 60; ++i) {
    std::string p;
    const int len = 2 + int(rng() % 3);
    for (int k = 0; k < len; ++k) p += alphabet[rng() % alphabet.size()];
    pieces.push_back(p);
  }
  pieces.push_back("[0]");  // the shortest answer (the lowest byte first) in one token
  auto vocab = TokenVocabulary::from_pieces(pieces, {0});
  GrammarMatcher fresh(bracket_digits(), vocab);
  ASSERT_EQ(fresh.min_completion(), 3u);
  ASSERT_EQ(fresh.min_completion_tokens(), 1u);  // "[0]"
  std::normal_distribution<float> noise;
  int past_bytes = 0;  // answers with more bytes than their budget's tokens
  for (uint64_t seed = 0; seed < 300; ++seed) {
    SamplingParams p;
    p.grammar = bracket_digits();
    p.temperature = 2.0f;
    p.seed = seed;
    Sampler s(p, vocab);
    const int budget = 1 + int(seed % 3);
    std::string text;
    std::vector<int32_t> out;
    for (int step = 0; step < budget && !s.grammar_done(); ++step) {
      std::vector<float> l(pieces.size());
      for (float& v : l) v = 3.0f * noise(rng);
      const int32_t t = s.sample(l.data(), int32_t(l.size()), out, budget - step);
      ASSERT_GT(t, 0) << "seed " << seed << " budget " << budget << " after '" << text << "'";
      text += pieces[size_t(t)];
      out.push_back(t);
    }
    EXPECT_TRUE(s.grammar()->complete()) << "seed " << seed << " budget " << budget << ": '" << text << "'";
    past_bytes += int(text.size() > size_t(budget));
  }
  EXPECT_GT(past_bytes, 0);  // answers longer in bytes than their tokens: the token budget did the work
}

}  // namespace
}  // namespace agentkv
