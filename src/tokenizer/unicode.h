// UTF-8 and code point helpers for the tokenizers. The decoding rules deliberately follow
// llama.cpp's (not the strict UTF-8 spec) because token ids must match it byte for byte: a byte
// that cannot start a well-formed sequence becomes U+FFFD and only that byte is consumed, while
// overlong forms and surrogates are *accepted* and decoded arithmetically.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace agentkv::unicode {

struct CodepointRange {
  uint32_t first, last;  // inclusive
};

inline constexpr uint32_t kReplacement = 0xFFFD;
inline constexpr uint32_t kMaxCodepoint = 0x10FFFF;

// Length of the UTF-8 sequence announced by a lead byte, from its high nibble only (continuation
// bytes count as 1). Used by the merge loops, which split text into "characters" this way.
size_t utf8_len(uint8_t lead);

// Decodes one code point at `pos` and advances it (see the file comment for the leniency rules).
// A 4-byte form above U+10FFFF is reported as U+FFFD with one byte consumed.
uint32_t decode_one(std::string_view s, size_t& pos);
std::vector<uint32_t> decode(std::string_view s);

void append_utf8(std::string& out, uint32_t cp);  // cp must be <= 0x10FFFF
std::string to_utf8(const std::vector<uint32_t>& cps, size_t begin, size_t end);

bool is_letter(uint32_t cp);
bool is_number(uint32_t cp);
bool is_whitespace(uint32_t cp);

// GPT-2 bytes_to_unicode: every byte maps to one printable code point; the inverse returns -1 for
// code points outside the 256 mapped ones.
uint32_t byte_to_codepoint(uint8_t b);
int codepoint_to_byte(uint32_t cp);
// UTF-8 of byte_to_codepoint(b), cached.
const std::string& byte_to_utf8(uint8_t b);

// Number of bytes at the end of `s` that form the start of an incomplete UTF-8 sequence (0 if the
// tail is complete or not a valid prefix at all). Used by streaming output to hold bytes back.
size_t incomplete_utf8_tail(std::string_view s);

extern const char kUnicodeVersion[];

}  // namespace agentkv::unicode
