// libFuzzer target: encodes arbitrary bytes with a small built-in byte-level BPE vocab (under the
// smollm, qwen2, llama-bpe and gpt-4o pre-tokenizers) and a small SentencePiece vocab (no model files), then
// decodes. Checks invariants that hold for any input: ids are in range, valid UTF-8 input
// round-trips through the streaming decoder (both vocabs have all 256 byte tokens), and decode() is
// what streaming gives -- less some spaces for llama-bpe, whose decode() cleans spaces like llama.cpp.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>

#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode.h"

namespace {

using agentkv::Tokenizer;
using agentkv::TokenType;
using agentkv::VocabData;

std::unique_ptr<Tokenizer> build_bpe(const char* pre) {
  VocabData v;
  v.model = "gpt2";
  v.pre = pre;
  for (int b = 0; b < 256; ++b) v.tokens.push_back(agentkv::unicode::byte_to_utf8(static_cast<uint8_t>(b)));
  v.token_types.assign(256, static_cast<int32_t>(TokenType::kNormal));
  const char* merges[] = {"\xC4\xA0 t", "h e", "\xC4\xA0t he", "i n", "e r", "\xC4\xA0 a", "o n", "a n"};
  for (const char* m : merges) {
    const std::string s(m);
    const size_t sp = s.find(' ');
    v.tokens.push_back(s.substr(0, sp) + s.substr(sp + 1));
    v.token_types.push_back(static_cast<int32_t>(TokenType::kNormal));
    v.merges.push_back(s);
  }
  for (const char* sp : {"<|im_start|>", "<|im_end|>"}) {
    v.tokens.push_back(sp);
    v.token_types.push_back(static_cast<int32_t>(TokenType::kControl));
  }
  v.tokens.push_back("<tag>");
  v.token_types.push_back(static_cast<int32_t>(TokenType::kUserDefined));
  auto t = Tokenizer::create(std::move(v));
  if (!t.ok()) std::abort();
  return std::move(t).value();
}

std::unique_ptr<Tokenizer> build_spm() {
  VocabData v;
  v.model = "llama";
  v.bos = 0;
  static const char* kHex = "0123456789ABCDEF";
  v.tokens.push_back("<bos>");
  v.token_types.push_back(static_cast<int32_t>(TokenType::kControl));
  v.scores.push_back(0);
  for (int b = 0; b < 256; ++b) {
    v.tokens.push_back(std::string("<0x") + kHex[b >> 4] + kHex[b & 15] + ">");
    v.token_types.push_back(static_cast<int32_t>(TokenType::kByte));
    v.scores.push_back(0);
  }
  const char* normal[] = {"\xE2\x96\x81",
                          "a",
                          "b",
                          "ab",
                          ("\xE2\x96\x81"
                           "a"),
                          "ba",
                          "aba",
                          "\xC3\xA9",
                          "\n"};
  float score = -1;
  for (const char* n : normal) {
    v.tokens.push_back(n);
    v.token_types.push_back(static_cast<int32_t>(TokenType::kNormal));
    v.scores.push_back(score);
    score -= 0.5f;
  }
  v.tokens.push_back("  ");
  v.token_types.push_back(static_cast<int32_t>(TokenType::kUserDefined));
  v.scores.push_back(0);
  auto t = Tokenizer::create(std::move(v));
  if (!t.ok()) std::abort();
  return std::move(t).value();
}

bool valid_utf8(std::string_view s) {
  // Strict check: round-trip through the lenient decoder must be byte-identical and free of U+FFFD
  // (unless the input contained U+FFFD itself), surrogates and overlongs.
  size_t pos = 0;
  while (pos < s.size()) {
    const size_t start = pos;
    const uint32_t cp = agentkv::unicode::decode_one(s, pos);
    std::string re;
    agentkv::unicode::append_utf8(re, cp);
    if (re != s.substr(start, pos - start)) return false;
    if (cp >= 0xD800 && cp <= 0xDFFF) return false;
  }
  return true;
}

// `out` is `full` with some spaces left out (all that llama.cpp's clean_spaces passes remove).
bool less_spaces(std::string_view out, std::string_view full) {
  size_t j = 0;
  for (char c : full) {
    if (j < out.size() && out[j] == c) {
      ++j;
    } else if (c != ' ') {
      return false;
    }
  }
  return j == out.size();
}

void check(const Tokenizer& tok, std::string_view text, bool parse_special, bool cleans_spaces = false) {
  const auto ids = tok.encode(text, false, parse_special);
  for (int32_t id : ids) {
    if (id < 0 || id >= tok.n_vocab()) std::abort();
  }
  const std::string out = tok.decode(ids, true);
  agentkv::StreamDecoder sd(tok, true);
  std::string streamed;
  for (int32_t id : ids) streamed += sd.push(id);
  streamed += sd.flush();
  if (cleans_spaces ? !less_spaces(out, streamed) : streamed != out) std::abort();
  // Both vocabularies can spell every byte, so valid UTF-8 must round-trip -- except that
  // SentencePiece decodes a literal U+2581 in the input as a space, like llama.cpp.
  const bool has_2581 = text.find("\xE2\x96\x81") != std::string_view::npos;
  if (valid_utf8(text) && !(tok.kind() == Tokenizer::Kind::kSpm && has_2581) && streamed != text) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::unique_ptr<Tokenizer> bpe = build_bpe("smollm");
  static const std::unique_ptr<Tokenizer> qwen2 = build_bpe("qwen2");
  static const std::unique_ptr<Tokenizer> llama3 = build_bpe("llama-bpe");
  static const std::unique_ptr<Tokenizer> gpt4o = build_bpe("gpt-4o");
  static const std::unique_ptr<Tokenizer> spm = build_spm();
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  for (bool ps : {false, true}) {
    check(*bpe, text, ps);
    check(*qwen2, text, ps);
    check(*llama3, text, ps, /*cleans_spaces=*/true);
    check(*gpt4o, text, ps);
    check(*spm, text, ps);
  }
  return 0;
}
