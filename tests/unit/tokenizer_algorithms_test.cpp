// Tokenizer algorithms on tiny hand-made vocabularies (no model files).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_core.h"
#include "tokenizer/unicode.h"

namespace agentkv {
namespace {

using Ids = std::vector<int32_t>;

// A byte-level BPE vocab: the 256 byte symbols first (id = byte), then `extra` tokens.
VocabData bpe_vocab(const std::vector<std::string>& extra, const std::vector<std::string>& merges,
                    const std::vector<std::pair<std::string, TokenType>>& specials = {}) {
  VocabData v;
  v.model = "gpt2";
  v.pre = "smollm";
  for (int b = 0; b < 256; ++b) v.tokens.push_back(unicode::byte_to_utf8(static_cast<uint8_t>(b)));
  v.token_types.assign(256, static_cast<int32_t>(TokenType::kNormal));
  for (const auto& t : extra) {
    v.tokens.push_back(t);
    v.token_types.push_back(static_cast<int32_t>(TokenType::kNormal));
  }
  for (const auto& [t, type] : specials) {
    v.tokens.push_back(t);
    v.token_types.push_back(static_cast<int32_t>(type));
  }
  v.merges = merges;
  return v;
}

std::unique_ptr<Tokenizer> make(VocabData v) {
  auto t = Tokenizer::create(std::move(v));
  EXPECT_TRUE(t.ok()) << (t.ok() ? "" : t.error());
  return t.ok() ? std::move(t).value() : nullptr;
}

std::vector<std::string> pieces(const std::string& s, BpePre pre = BpePre::kSmollm) {
  const auto cps = unicode::decode(s);
  std::vector<std::string> out;
  for (const auto& [b, e] : bpe_pretokenize(pre, cps)) out.push_back(unicode::to_utf8(cps, b, e));
  return out;
}

TEST(TokenizerPretokenize, SmollmSplitsDigitsAndFollowsGpt2Pattern) {
  using V = std::vector<std::string>;
  EXPECT_EQ(pieces("Hello world! 123"), (V{"Hello", " world", "!", " ", "1", "2", "3"}));
  EXPECT_EQ(pieces("  multiple   spaces"), (V{" ", " multiple", "  ", " spaces"}));
  EXPECT_EQ(pieces("I'm don't"), (V{"I", "'m", " don", "'t"}));
  EXPECT_EQ(pieces("a\n\nb"), (V{"a", "\n", "\n", "b"}));
  EXPECT_EQ(pieces("x  "), (V{"x", "  "}));
  EXPECT_EQ(pieces("caf\xC3\xA9!?"), (V{"caf\xC3\xA9", "!?"}));
  EXPECT_EQ(pieces("\xD9\xA3x"), (V{"\xD9\xA3", "x"}));  // ARABIC-INDIC DIGIT THREE is \p{N}
}

// llama-bpe is qwen2's pattern with digits in threes: the rest (contractions in any case, one
// leading non-letter, punctuation taking line breaks, \s*[\r\n]+, \s+(?!\S)) is shared.
TEST(TokenizerPretokenize, Llama3GroupsDigitsInThreesAndOtherwiseFollowsQwen2) {
  using V = std::vector<std::string>;
  EXPECT_EQ(pieces("1234567 x12", BpePre::kLlama3), (V{"123", "456", "7", " x", "12"}));
  EXPECT_EQ(pieces("1234567 x12", BpePre::kQwen2), (V{"1", "2", "3", "4", "5", "6", "7", " x", "1", "2"}));
  for (BpePre pre : {BpePre::kQwen2, BpePre::kLlama3}) {
    EXPECT_EQ(pieces("WE'LL i'M", pre), (V{"WE", "'LL", " i", "'M"}));
    EXPECT_EQ(pieces("ok.\n\nNext", pre), (V{"ok", ".\n\n", "Next"}));
    EXPECT_EQ(pieces("a  \n b   c  ", pre), (V{"a", "  \n", " b", "  ", " c", "  "}));
  }
}

// gpt-4o as llama.cpp runs it (std::regex, non-ASCII letters both upper and lower case): letter runs
// split where lower case follows upper, contractions only after a word, "/" after punctuation.
TEST(TokenizerPretokenize, Gpt4oSplitsLetterRunsByCase) {
  using V = std::vector<std::string>;
  const BpePre g = BpePre::kGpt4o;
  EXPECT_EQ(pieces("HelloWorld helloWorld HELLOworld", g),
            (V{"Hello", "World", " hello", "World", " HELLOworld"}));
  // É has no ASCII case: it may end an upper-case run or start a lower-case one.
  const std::string e_acute = "\xC3\x89";
  EXPECT_EQ(pieces(e_acute + "COLE " + e_acute + "cole", g), (V{e_acute, "COLE", " " + e_acute + "cole"}));
  EXPECT_EQ(pieces("DON'T it's 'tis", g), (V{"DON'T", " it's", " '", "tis"}));
  EXPECT_EQ(pieces("a/b x?\n/y 1234567", g), (V{"a", "/b", " x", "?\n/", "y", " ", "123", "456", "7"}));
}

TEST(TokenizerBpe, MergeRankOrderDecides) {
  // "abc" with merges [a b, b c] -> "ab" + "c"; with [b c, a b] -> "a" + "bc".
  auto t1 = make(bpe_vocab({"ab", "bc"}, {"a b", "b c"}));
  auto t2 = make(bpe_vocab({"ab", "bc"}, {"b c", "a b"}));
  EXPECT_EQ(t1->encode("abc", false, false), (Ids{256, 'c'}));
  EXPECT_EQ(t2->encode("abc", false, false), (Ids{'a', 257}));
  // Chained merges and the GPT-2 byte map for the space (U+0120): in " abc" the top-ranked
  // "Ġ a" merge claims the "a" first, so "ab"/"abc" cannot form there.
  auto t3 = make(bpe_vocab({"ab", "abc",
                            "\xC4\xA0"
                            "a"},
                           {"\xC4\xA0 a", "a b", "ab c"}));
  EXPECT_EQ(t3->encode("abc abc", false, false), (Ids{257, 258, 'b', 'c'}));
  EXPECT_EQ(t3->decode(t3->encode("abc abc", false, false)), "abc abc");
}

TEST(TokenizerBpe, EqualRanksMergeLeftmostFirst) {
  auto t = make(bpe_vocab({"aa"}, {"a a"}));
  EXPECT_EQ(t->encode("aaa", false, false), (Ids{256, 'a'}));
}

// llama-bpe's ignore_merges: a pre-token that is a vocab entry is that token even where the merges
// would never build it ("abc" here: no "ab c" merge); other pre-tokens are merged as usual.
TEST(TokenizerBpe, Llama3TakesAVocabWordWholeWithoutMerging) {
  VocabData v = bpe_vocab({"ab", "abc", "bc"}, {"a b", "b c"});
  auto smollm = make(v);
  v.pre = "llama-bpe";
  auto llama3 = make(v);
  EXPECT_EQ(smollm->encode("abc", false, false), (Ids{256, 'c'}));
  EXPECT_EQ(llama3->encode("abc", false, false), (Ids{257}));
  EXPECT_EQ(llama3->encode("abab", false, false), (Ids{256, 256}));
}

// llama-bpe's clean_spaces, as llama_detokenize applies it (token_to_piece and streaming do not).
TEST(TokenizerBpe, Llama3DecodeCleansSpacesLikeLlamaCpp) {
  auto clean = [](std::string s) {
    clean_up_spaces(s);
    return s;
  };
  EXPECT_EQ(clean(" Hi , you ! ok ? a . b"), " Hi, you! ok? a. b");
  EXPECT_EQ(clean("say ' hi ' ' x"), "say'hi'' x");  // the space after a removed " ' " is skipped too
  EXPECT_EQ(clean("it 's I 'm we 're you 've"), "it's I'm we're you've");
  EXPECT_EQ(clean("don 't he 'd we 'll 'r 'e"), "don 't he 'd we 'll 'r 'e");
  EXPECT_EQ(clean("a  ,"), "a ,");
  EXPECT_EQ(clean(""), "");
  VocabData v = bpe_vocab({}, {});
  v.pre = "llama-bpe";
  auto t = make(v);
  const Ids ids = t->encode("Hi , x 's", false, false);
  EXPECT_EQ(t->decode(ids), "Hi, x's");
  std::string pieces;
  for (int32_t id : ids) pieces += t->token_to_piece(id, false);
  EXPECT_EQ(pieces, "Hi , x 's");
}

TEST(TokenizerBpe, InvalidUtf8BecomesReplacementCharacterBytes) {
  auto t = make(bpe_vocab({}, {}));
  // 0xFF -> U+FFFD -> bytes EF BF BD, each its own byte symbol here.
  EXPECT_EQ(t->encode("\xFF", false, false), (Ids{0xEF, 0xBF, 0xBD}));
  // Overlong C0 80 is accepted and decoded to U+0000.
  EXPECT_EQ(t->encode("\xC0\x80", false, false), (Ids{0x00}));
}

TEST(TokenizerBpe, UnknownSymbolFallsBackToOneByteTokens) {
  // Only ASCII letters exist as tokens; the merged symbol "xy" is not a token: bytes "x", "y".
  VocabData v;
  v.model = "gpt2";
  v.pre = "smollm";
  v.tokens = {"x", "y"};
  v.merges = {"x y"};
  auto t = make(std::move(v));
  EXPECT_EQ(t->encode("xy", false, false), (Ids{0, 1}));
  EXPECT_EQ(t->encode("z", false, false), Ids{});  // no token for "z": dropped, like llama.cpp
}

VocabData spm_vocab() {
  VocabData v;
  v.model = "llama";
  v.pre = "default";
  v.bos = 1;
  v.eos = 2;
  v.add_bos = true;
  auto add = [&](const std::string& t, float score, TokenType type) {
    v.tokens.push_back(t);
    v.scores.push_back(score);
    v.token_types.push_back(static_cast<int32_t>(type));
  };
  add("<unk>", 0, TokenType::kUnknown);
  add("<s>", 0, TokenType::kControl);
  add("</s>", 0, TokenType::kControl);
  static const char* kHex = "0123456789ABCDEF";
  for (int b = 0; b < 256; ++b)
    add(std::string("<0x") + kHex[b >> 4] + kHex[b & 15] + ">", 0, TokenType::kByte);
  for (const char* c : {"h", "e", "l", "o", "\xE2\x96\x81"}) add(c, -10, TokenType::kNormal);  // 259..263
  add("he", -1, TokenType::kNormal);                                                           // 264
  add("ll", -2, TokenType::kNormal);                                                           // 265
  add("llo", -3, TokenType::kNormal);                                                          // 266
  add("hello", -4, TokenType::kNormal);                                                        // 267
  add("\xE2\x96\x81he", -5, TokenType::kNormal);                                               // 268
  add("el", -0.5f, TokenType::kNormal);                                                        // 269
  return v;
}

TEST(TokenizerSpm, ScoresDecideMerges) {
  auto t = make(spm_vocab());
  // "el" (-0.5) beats "he" (-1): h + el, then "ll"/"llo" cannot form around "el" -> h el l o.
  EXPECT_EQ(t->encode("hello", false, false), (Ids{259, 269, 261, 262}));
  EXPECT_EQ(t->encode("hell", true, false), (Ids{1, 259, 269, 261}));
  EXPECT_EQ(t->decode(t->encode("hello", false, false)), "hello");
}

TEST(TokenizerSpm, SpacesBecomeU2581AndUnknownCharsUseByteTokens) {
  auto t = make(spm_vocab());
  const Ids ids = t->encode(" h\xC3\xA9", false, false);
  EXPECT_EQ(ids, (Ids{263, 259, 3 + 0xC3, 3 + 0xA9}));
  EXPECT_EQ(t->decode(ids), " h\xC3\xA9");
  EXPECT_EQ(t->token_to_piece(3 + 0x41, false), "A");
}

TEST(TokenizerSpecial, ControlOnlyWithParseSpecialUserDefinedAlways) {
  auto t = make(bpe_vocab({}, {}, {{"<|c|>", TokenType::kControl}, {"<u>", TokenType::kUserDefined}}));
  const int32_t c = 256, u = 257;
  EXPECT_EQ(t->encode("a<|c|>b", false, true), (Ids{'a', c, 'b'}));
  EXPECT_EQ(t->encode("<u>", false, false), (Ids{u}));
  const Ids plain = t->encode("<|c|>", false, false);
  EXPECT_EQ(plain.size(), 5u);
  EXPECT_EQ(t->decode(Ids{'a', c, u}), "a<u>");
  EXPECT_EQ(t->decode(Ids{'a', c, u}, true), "a<|c|><u>");
  EXPECT_TRUE(t->is_special(c));
}

TEST(TokenizerSpecial, LongerTokenWinsEvenWhenAShorterOneStartsEarlier) {
  // llama.cpp searches longest tokens first over the whole text: "abcd" -> "a" [bcd], not [ab] "cd".
  auto t = make(bpe_vocab({}, {}, {{"ab", TokenType::kControl}, {"bcd", TokenType::kControl}}));
  EXPECT_EQ(t->encode("abcd", false, true), (Ids{'a', 257}));
  EXPECT_EQ(t->encode("ab ab", false, true), (Ids{256, ' ', 256}));
}

TEST(TokenizerSpecial, EndOfGenerationByText) {
  auto t =
      make(bpe_vocab({}, {}, {{"<|im_end|>", TokenType::kControl}, {"<|endoftext|>", TokenType::kNormal}}));
  EXPECT_TRUE(t->is_eog(256));
  EXPECT_TRUE(t->is_eog(257));
  EXPECT_TRUE(t->is_special(257));  // forced to CONTROL, as llama.cpp does
  EXPECT_FALSE(t->is_eog('a'));
}

// encode_within is encode when the text fits, and refuses (early) when it does not: texts with and
// without the cuts it encodes pieces at (digits, " word"), special tokens and invalid UTF-8, at
// every limit around the true count, under each BPE pre-tokenizer.
TEST(TokenizerBounded, EncodeWithinIsEncodeOrRefusesOverTheLimit) {
  VocabData v = bpe_vocab(
      {"he", "hel", "hell", "hello", " w", " wo", "or", "ld", " world", "\xC4\xA0\xC4\xA0", "12", "123"},
      {"h e", "he l", "hel l", "hell o", "\xC4\xA0 w", "o r", "l d", "\xC4\xA0w or", "\xC4\xA0wor ld",
       "\xC4\xA0 \xC4\xA0", "1 2", "12 3"},
      {{"<|c|>", TokenType::kControl}});
  std::string big;  // digit runs and spaces before digits, where the pre-tokenizers' cuts differ
  for (int i = 0; i < 3000; ++i) big += "hello world 12 <|c|>x\xff a  1234567 ";
  std::string letters(20000, 'h');  // no place to cut: one fragment
  for (const char* pre : {"smollm", "qwen2", "llama-bpe", "gpt-4o"}) {
    v.pre = pre;
    auto t = make(v);
    for (const std::string& text : {std::string("hello world"), big, letters, big + letters + big}) {
      for (bool special : {false, true}) {
        const std::vector<int32_t> want = t->encode(text, false, special);
        const int64_t n = int64_t(want.size());
        for (int64_t limit : {n, n + 1, n + 100000}) {
          auto got = t->encode_within(text, false, special, limit);
          ASSERT_TRUE(got.has_value()) << pre << " " << limit;
          EXPECT_EQ(*got, want) << pre;
        }
        for (int64_t limit : {int64_t(0), n / 2, n - 1}) {
          EXPECT_FALSE(t->encode_within(text, false, special, limit).has_value()) << pre;
        }
      }
    }
    // No token here covers more than 6 bytes, so 1 MB cannot be 100 tokens (refused unread).
    EXPECT_EQ(t->min_tokens(600), 100);
    EXPECT_FALSE(t->encode_within(std::string(1 << 20, 'h'), false, false, 100).has_value());
  }
}

// A vocabulary where some byte has no token cannot bound tokens by bytes (that byte vanishes).
TEST(TokenizerBounded, NoByteBoundWhenAByteHasNoToken) {
  VocabData v = bpe_vocab({}, {});
  v.tokens[int('q')] = "[EMPTY]";
  auto t = make(std::move(v));
  EXPECT_EQ(t->min_tokens(1000), 0);
  EXPECT_TRUE(t->encode_within(std::string(1000, 'q'), false, false, 0).has_value());
}

TEST(TokenizerUnicode, LenientDecodingRules) {
  EXPECT_EQ(unicode::decode("\xC0\x80"), (std::vector<uint32_t>{0}));
  EXPECT_EQ(unicode::decode("\xED\xA0\x80"), (std::vector<uint32_t>{0xD800}));
  EXPECT_EQ(unicode::decode("\xE2\x82("), (std::vector<uint32_t>{0xFFFD, 0xFFFD, '('}));
  EXPECT_EQ(unicode::decode("\xF7\xBF\xBF\xBF").size(), 4u);  // > U+10FFFF: byte by byte
  EXPECT_EQ(unicode::incomplete_utf8_tail("a\xE2\x82"), 2u);
  EXPECT_EQ(unicode::incomplete_utf8_tail("a\xE2\x82\xAC"), 0u);
  EXPECT_EQ(unicode::incomplete_utf8_tail("\xF0\x9F\x98"), 3u);
  for (int b = 0; b < 256; ++b) {
    EXPECT_EQ(unicode::codepoint_to_byte(unicode::byte_to_codepoint(static_cast<uint8_t>(b))), b);
  }
  EXPECT_EQ(unicode::byte_to_codepoint(' '), 0x120u);
  EXPECT_EQ(unicode::byte_to_codepoint('\n'), 0x10Au);
}

TEST(TokenizerStream, HoldsBackIncompleteUtf8) {
  auto t = make(spm_vocab());
  StreamDecoder sd(*t);
  EXPECT_EQ(sd.push(3 + 0xE2), "");
  EXPECT_EQ(sd.push(3 + 0x82), "");
  EXPECT_EQ(sd.push(3 + 0xAC), "\xE2\x82\xAC");
  EXPECT_EQ(sd.push(259), "h");
  EXPECT_EQ(sd.push(3 + 0xC3), "");
  EXPECT_EQ(sd.flush(), "\xC3");
}

TEST(TokenizerCreate, RejectsUnsupportedModels) {
  VocabData v = bpe_vocab({}, {});
  v.pre = "tekken";
  EXPECT_FALSE(Tokenizer::create(v).ok());
  v.model = "bert";
  EXPECT_FALSE(Tokenizer::create(v).ok());
  EXPECT_FALSE(Tokenizer::create(VocabData{}).ok());
}

TEST(ChatTemplate, ChatMLWithDefaultSystemFromTemplate) {
  VocabData v =
      bpe_vocab({}, {}, {{"<|im_start|>", TokenType::kControl}, {"<|im_end|>", TokenType::kControl}});
  v.chat_template =
      "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
      "{{ '<|im_start|>system\\nBe nice<|im_end|>\\n' }}{% endif %}...";
  auto t = make(std::move(v));
  const std::vector<ChatMessage> msgs = {{"user", "Hi"}};
  auto out = apply_chat_template(*t, msgs, true);
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(out.value(),
            "<|im_start|>system\nBe nice<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  const std::vector<ChatMessage> sys = {{"system", "S"}, {"user", "Hi"}};
  EXPECT_EQ(apply_chat_template(*t, sys, false).value(),
            "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n");
}

TEST(ChatTemplate, GemmaTurns) {
  VocabData v = spm_vocab();
  v.architecture = "gemma3";
  auto t = make(std::move(v));
  const std::vector<ChatMessage> msgs = {
      {"system", "Sys"}, {"user", " Hi \n"}, {"assistant", "Yo"}, {"user", "Q"}};
  EXPECT_EQ(apply_chat_template(*t, msgs, true).value(),
            "<start_of_turn>user\nSys\n\nHi<end_of_turn>\n<start_of_turn>model\nYo<end_of_turn>\n"
            "<start_of_turn>user\nQ<end_of_turn>\n<start_of_turn>model\n");
  const std::vector<ChatMessage> bad = {{"user", "a"}, {"user", "b"}};
  EXPECT_FALSE(apply_chat_template(*t, bad, true).ok());
}

}  // namespace
}  // namespace agentkv
