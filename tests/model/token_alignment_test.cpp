// Alignment is exact on byte spans: over the tokenizer corpus and public text (KJV, with its
// non-ASCII-free prose, plus the corpus's accents, emoji and byte-fallback cases), in both
// directions, every token's span is its decoded piece, spans tile the text, and every receiver
// token maps to the minimal run of sender tokens whose spans cover its bytes.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>

#include "kjv_corpus.h"
#include "model_test_util.h"
#include "transfer/token_alignment.h"
#include "util/json.h"

namespace agentkv::testing {
namespace {

std::vector<std::string> alignment_corpus() {
  std::vector<std::string> texts;
  std::ifstream in(source_path("tests/data/tokenizer/corpus.jsonl"));
  std::string line;
  while (std::getline(in, line)) {
    auto j = parse_json(line);
    EXPECT_TRUE(j.ok()) << line;
    if (!j.ok()) continue;
    const Json* t = json_member(*j, "text");
    if (t && t->is_string()) texts.push_back(t->get<std::string>());
  }
  EXPECT_GT(texts.size(), 20u);
  for (const std::string& ch : kjv_chapters("joh", 1, 3)) texts.push_back(ch);
  return texts;
}

void check_spans(const TokenSpans& sp, const Tokenizer& tok, const std::string& text, size_t* n_dropped) {
  ASSERT_EQ(sp.text_bytes, text.size());
  size_t at = 0;
  for (size_t i = 0; i < sp.size(); ++i) {
    ASSERT_EQ(sp.begin[i], at) << "spans do not tile the text at token " << i;
    ASSERT_LE(sp.begin[i], sp.end[i]);
    // A token owns the bytes it decodes to, plus any the tokenizer dropped just before it (and an
    // SPM space may be a U+2581 in the text): re-encoding what it owns gives back its piece.
    const std::string piece = tok.token_to_piece(sp.tokens[i], false);
    const std::string raw = text.substr(sp.begin[i], sp.end[i] - sp.begin[i]);
    std::string owned;
    for (size_t k = 0; k < raw.size(); ++k) {
      if (tok.kind() == Tokenizer::Kind::kSpm && raw.compare(k, 3, "\xE2\x96\x81") == 0) {
        owned.push_back(' ');
        k += 2;
      } else {
        owned.push_back(raw[k]);
      }
    }
    ASSERT_GE(owned.size(), piece.size());
    if (i + 1 < sp.size()) {
      EXPECT_EQ(owned.substr(owned.size() - piece.size()), piece) << "token " << i << " of " << dump_json(Json(text));
    } else if (!piece.empty()) {
      EXPECT_NE(owned.find(piece), std::string::npos);
    }
    *n_dropped += owned.size() - piece.size();
    if (sp.begin[i] == sp.end[i]) {
      EXPECT_EQ(sp.tokens[i], tok.bos_id()) << "only BOS may have an empty span";
    }
    at = sp.end[i];
  }
  if (sp.size() > 0) {
    EXPECT_EQ(at, text.size());  // (a text of dropped bytes only has no token to tile it)
  }
}

void check_alignment(const TokenSpans& r, const TokenSpans& s, const TokenAlignment& a, const std::string& text) {
  ASSERT_EQ(a.size(), r.size());
  for (size_t t = 0; t < r.size(); ++t) {
    const size_t b = r.begin[t], e = r.end[t];
    if (b == e) {
      EXPECT_EQ(a.count[t], 0);
      continue;
    }
    if (a.count[t] == 0) {
      // Only possible when the sender tokenizer dropped every byte of the text.
      for (size_t i = 0; i < s.size(); ++i) EXPECT_EQ(s.begin[i], s.end[i]) << dump_json(Json(text));
      continue;
    }
    const size_t f = size_t(a.first[t]), l = f + size_t(a.count[t]) - 1;
    ASSERT_LT(l, s.size());
    // Cover: the run's union (contiguous, since spans tile) contains [b, e).
    EXPECT_LE(s.begin[f], b);
    EXPECT_GE(s.end[l], e);
    for (size_t i = f; i < l; ++i) EXPECT_EQ(s.end[i], s.begin[i + 1]);
    // Minimal: both ends overlap the receiver span, so neither can be dropped.
    EXPECT_GT(s.end[f], b);
    EXPECT_LT(s.begin[l], e);
    EXPECT_LT(s.begin[f], s.end[f]);
    EXPECT_LT(s.begin[l], s.end[l]);
  }
}

TEST(TokenAlignment, SpansTileAndRunsAreExactAndMinimal) {
  const LoadedModel& a = real_model("smollm2");
  const LoadedModel& b = real_model("gemma3");
  int n_multi = 0, n_partial_char = 0;
  size_t n_dropped = 0;
  for (const std::string& text : alignment_corpus()) {
    auto sa = tokenize_with_spans(*a.tokenizer, text, a.tokenizer->add_bos_default());
    auto sb = tokenize_with_spans(*b.tokenizer, text, b.tokenizer->add_bos_default());
    ASSERT_TRUE(sa.ok()) << sa.error() << " in " << dump_json(Json(text));
    ASSERT_TRUE(sb.ok()) << sb.error() << " in " << dump_json(Json(text));
    check_spans(*sa, *a.tokenizer, text, &n_dropped);
    check_spans(*sb, *b.tokenizer, text, &n_dropped);
    for (size_t i = 0; i < sb->size(); ++i) {
      // A span boundary inside a UTF-8 character: byte fallback or byte-level BPE split it.
      if (sb->end[i] < text.size() && (uint8_t(text[sb->end[i]]) & 0xC0) == 0x80) ++n_partial_char;
    }
    const TokenAlignment ab = align_tokens(*sa, *sb);
    const TokenAlignment ba = align_tokens(*sb, *sa);
    check_alignment(*sa, *sb, ab, text);
    check_alignment(*sb, *sa, ba, text);
    for (int32_t c : ab.count) n_multi += c > 1;
  }
  // The corpus must exercise the hard cases, or the property says little.
  EXPECT_GT(n_multi, 0) << "no receiver token spanned several sender tokens";
  EXPECT_GT(n_partial_char, 0) << "no multi-token character in the corpus";
  std::printf("alignment corpus: %d multi-token runs, %d split characters, %zu dropped bytes\n", n_multi, n_partial_char,
              n_dropped);
}

}  // namespace
}  // namespace agentkv::testing
