// Constrained decoding on the real vocabularies (byte-level BPE of SmolLM2, SentencePiece with byte
// fallback of Gemma 3): every byte JSON text is made of can be written by a token of its own (so
// JSON decoding never runs out of tokens: SmolLM2's vocabulary lacks a few control bytes, which JSON
// escapes, and the lead bytes F1-F2 of rare 4-byte characters, which it can still write inside
// longer tokens), and the trie's masks equal a token-by-token check in the states JSON decoding
// passes through, including tokens that span grammar boundaries; an answer sampled under a token
// budget shorter than its shortest form in bytes still closes in time. Times are printed, not asserted
// (BENCHMARKS.md has the cost per token under serving).
#include <gtest/gtest.h>

#include <chrono>
#include <random>

#include "engine/grammar_matcher.h"
#include "engine/json_schema_grammar.h"
#include "engine/sampler.h"
#include "model_test_util.h"

namespace agentkv {
namespace {

class GrammarVocab : public ::testing::TestWithParam<const char*> {};

Result<std::shared_ptr<const Grammar>> schema_grammar(std::string_view schema_text) {
  Json schema;
  AGENTKV_ASSIGN_OR_RETURN(schema, parse_json(schema_text));
  GrammarBuilder b;
  uint32_t root = 0;
  AGENTKV_ASSIGN_OR_RETURN(root, compile_json_schema(b, schema, "schema"));
  return b.build(root);
}

TEST_P(GrammarVocab, EveryByteHasAToken) {
  const LoadedModel& lm = testing::real_model(GetParam());
  auto vocab = TokenVocabulary::build(*lm.tokenizer);
  std::vector<bool> single(256, false);
  for (int32_t t = 0; t < vocab->n_vocab(); ++t)
    if (vocab->bytes(t).size() == 1) single[uint8_t(vocab->bytes(t)[0])] = true;
  for (int b = 0; b < 256; ++b) {
    const bool json_byte = (b >= 0x20 && b < 0x7f) || b == '\t' || b == '\n' || b == '\r' || (b >= 0x80 && b <= 0xbf) ||
                           (b >= 0xc2 && b <= 0xf0);
    if (json_byte) {
      EXPECT_TRUE(single[size_t(b)]) << GetParam() << ": no token is the byte " << b;
    }
  }
}

TEST_P(GrammarVocab, MasksEqualTokenByTokenChecks) {
  const LoadedModel& lm = testing::real_model(GetParam());
  auto vocab = TokenVocabulary::build(*lm.tokenizer);
  auto g = schema_grammar(R"({"type": "object", "properties": {
      "name": {"type": "string"}, "age": {"type": "integer"},
      "tags": {"type": "array", "items": {"enum": ["red", "green", "blue"]}, "maxItems": 3},
      "ok": {"type": "boolean"}}, "required": ["name", "age", "tags", "ok"], "additionalProperties": false})");
  ASSERT_TRUE(g.ok()) << g.error();
  GrammarMatcher m(*g, vocab);
  // A valid document, walked through the states it passes (every few bytes: start, inside the
  // string, after it, inside the number, the array, the boolean, complete).
  const std::string doc = R"({"name": "Ada \"L\" \u00e9t\u00e9 caf)" "\xc3\xa9" R"(", "age": 36, "tags": ["red", "blue"], "ok": true})";
  std::vector<uint8_t> mask;
  double mask_s = 0;
  int n_masks = 0;
  for (size_t i = 0; i <= doc.size(); i += 3) {
    GrammarMatcher at(*g, vocab);
    ASSERT_TRUE(at.advance_bytes(doc.substr(0, i))) << i;
    const auto t0 = std::chrono::steady_clock::now();
    at.fill_mask(mask);
    mask_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    ++n_masks;
    int allowed = 0;
    for (int32_t t = 0; t < vocab->n_vocab(); ++t) {
      ASSERT_EQ(mask[size_t(t)] != 0, at.allows(t)) << "after '" << doc.substr(0, i) << "': token " << t << " '"
                                                     << vocab->bytes(t) << "'";
      allowed += mask[size_t(t)];
    }
    EXPECT_GT(allowed, 0) << "after '" << doc.substr(0, i) << "'";
  }
  ASSERT_TRUE(m.advance_bytes(doc));
  EXPECT_TRUE(m.complete());
  EXPECT_FALSE(m.can_continue());
  std::printf("[%s] %d vocab, %zu trie nodes: first full mask in a fresh matcher %.2f ms on average\n", GetParam(),
              vocab->n_vocab(), vocab->nodes().size(), 1e3 * mask_s / n_masks);
}

TEST_P(GrammarVocab, AnswersCloseWithinTokenBudgetsBelowTheirBytes) {
  // A tool call's arguments: the shortest answer is 41 bytes but far fewer tokens. Sampled from
  // random logits at budgets from its closing plan's length up, every answer closes within the budget.
  const LoadedModel& lm = testing::real_model(GetParam());
  auto vocab = TokenVocabulary::build(*lm.tokenizer);
  auto g = schema_grammar(R"({"type": "object", "properties": {
      "location": {"type": "string"}, "unit": {"enum": ["celsius", "fahrenheit"]}, "days": {"type": "integer"}},
      "required": ["location", "unit", "days"], "additionalProperties": false})");
  ASSERT_TRUE(g.ok()) << g.error();
  GrammarMatcher fresh(*g, vocab);
  const uint32_t plan = fresh.min_completion_tokens();
  std::string shortest;
  for (int32_t t : fresh.closing_plan()) shortest += vocab->bytes(t);
  std::printf("[%s] shortest answer %u bytes, closing plan %u tokens: %s\n", GetParam(), fresh.min_completion(), plan,
              shortest.c_str());
  ASSERT_LT(plan, fresh.min_completion());
  std::mt19937 rng(1);
  std::normal_distribution<float> noise;
  std::vector<float> logits(size_t(vocab->n_vocab()));
  double grammar_s = 0;
  int tokens = 0;
  for (int trial = 0; trial < 12; ++trial) {
    SamplingParams p;
    p.grammar = *g;
    p.temperature = 1.0f;
    p.seed = uint64_t(trial);
    Sampler s(p, vocab);
    const int budget = int(plan) + trial % 4 * 3;
    std::string text;
    std::vector<int32_t> out;
    for (int step = 0; step < budget && !s.grammar_done(); ++step) {
      for (float& v : logits) v = 4.0f * noise(rng);
      const int32_t t = s.sample(logits.data(), vocab->n_vocab(), out, budget - step);
      ASSERT_GE(t, 0) << GetParam() << " budget " << budget << " after '" << text << "'";
      text += vocab->bytes(t);
      out.push_back(t);
    }
    EXPECT_TRUE(s.grammar()->complete()) << GetParam() << " budget " << budget << ": '" << text << "'";
    EXPECT_TRUE(parse_json(text).ok()) << text;
    grammar_s += s.grammar_seconds();
    tokens += int(out.size());
  }
  std::printf("[%s] grammar %.2f ms per token under tight budgets\n", GetParam(), 1e3 * grammar_s / tokens);
}

INSTANTIATE_TEST_SUITE_P(Models, GrammarVocab, ::testing::Values("smollm2", "gemma3"));

}  // namespace
}  // namespace agentkv
