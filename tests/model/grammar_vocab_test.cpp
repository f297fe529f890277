// Constrained decoding on the real vocabularies (byte-level BPE of SmolLM2, SentencePiece with byte
// fallback of Gemma 3): every byte JSON text is made of can be written by a token of its own (so
// JSON decoding never runs out of tokens: SmolLM2's vocabulary lacks a few control bytes, which JSON
// escapes, and the lead bytes F1-F2 of rare 4-byte characters, which it can still write inside
// longer tokens), and the trie's masks equal a token-by-token check in the states JSON decoding
// passes through, including tokens that span grammar boundaries. Times are printed, not asserted
// (BENCHMARKS.md has the cost per token under serving).
#include <gtest/gtest.h>

#include <chrono>

#include "engine/grammar_matcher.h"
#include "engine/json_schema_grammar.h"
#include "model_test_util.h"

namespace agentkv {
namespace {

class GrammarVocab : public ::testing::TestWithParam<const char*> {};

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
  auto schema = parse_json(R"({"type": "object", "properties": {
      "name": {"type": "string"}, "age": {"type": "integer"},
      "tags": {"type": "array", "items": {"enum": ["red", "green", "blue"]}, "maxItems": 3},
      "ok": {"type": "boolean"}}, "required": ["name", "age", "tags", "ok"], "additionalProperties": false})");
  ASSERT_TRUE(schema.ok());
  GrammarBuilder b;
  auto root = compile_json_schema(b, *schema, "schema");
  ASSERT_TRUE(root.ok()) << root.error();
  auto g = b.build(*root);
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

INSTANTIATE_TEST_SUITE_P(Models, GrammarVocab, ::testing::Values("smollm2", "gemma3"));

}  // namespace
}  // namespace agentkv
