#include "tokenizer/unicode.h"

#include <algorithm>
#include <array>

namespace agentkv::unicode {

extern const CodepointRange kLetterRanges[];
extern const size_t kLetterRanges_size;
extern const CodepointRange kNumberRanges[];
extern const size_t kNumberRanges_size;
extern const uint32_t kWhitespace[];
extern const size_t kWhitespace_size;

size_t utf8_len(uint8_t lead) {
  static constexpr uint8_t kLen[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
  return kLen[lead >> 4];
}

namespace {

bool is_cont(std::string_view s, size_t i) {
  return i < s.size() && (static_cast<uint8_t>(s[i]) & 0xC0) == 0x80;
}

bool in_ranges(const CodepointRange* r, size_t n, uint32_t cp) {
  const CodepointRange* end = r + n;
  const CodepointRange* it =
      std::upper_bound(r, end, cp, [](uint32_t v, const CodepointRange& x) { return v < x.first; });
  if (it == r) return false;
  --it;
  return cp <= it->last;
}

struct ByteMaps {
  std::array<uint32_t, 256> to_cp{};
  std::array<std::string, 256> to_utf8;
  ByteMaps() {
    std::array<bool, 256> direct{};
    for (int b = 0; b < 256; ++b) {
      direct[b] = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    }
    uint32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      to_cp[b] = direct[b] ? static_cast<uint32_t>(b) : next++;
      append_utf8(to_utf8[b], to_cp[b]);
    }
  }
};

const ByteMaps& byte_maps() {
  static const ByteMaps maps;
  return maps;
}

}  // namespace

uint32_t decode_one(std::string_view s, size_t& pos) {
  const auto b0 = static_cast<uint8_t>(s[pos]);
  auto cont = [&](size_t k) { return static_cast<uint32_t>(static_cast<uint8_t>(s[pos + k]) & 0x3F); };
  if (b0 < 0x80) {
    pos += 1;
    return b0;
  }
  if ((b0 & 0xE0) == 0xC0 && is_cont(s, pos + 1)) {
    const uint32_t cp = ((b0 & 0x1Fu) << 6) | cont(1);
    pos += 2;
    return cp;
  }
  if ((b0 & 0xF0) == 0xE0 && is_cont(s, pos + 1) && is_cont(s, pos + 2)) {
    const uint32_t cp = ((b0 & 0x0Fu) << 12) | (cont(1) << 6) | cont(2);
    pos += 3;
    return cp;
  }
  if ((b0 & 0xF8) == 0xF0 && is_cont(s, pos + 1) && is_cont(s, pos + 2) && is_cont(s, pos + 3)) {
    const uint32_t cp = ((b0 & 0x07u) << 18) | (cont(1) << 12) | (cont(2) << 6) | cont(3);
    // llama.cpp decodes these too but then throws while re-encoding them (the process aborts);
    // we degrade to the invalid-byte rule instead.
    if (cp <= kMaxCodepoint) {
      pos += 4;
      return cp;
    }
  }
  pos += 1;
  return kReplacement;
}

std::vector<uint32_t> decode(std::string_view s) {
  std::vector<uint32_t> out;
  out.reserve(s.size());
  size_t pos = 0;
  while (pos < s.size()) out.push_back(decode_one(s, pos));
  return out;
}

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | ((cp >> 18) & 0x07)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

std::string to_utf8(const std::vector<uint32_t>& cps, size_t begin, size_t end) {
  std::string out;
  out.reserve(end - begin);
  for (size_t i = begin; i < end; ++i) append_utf8(out, cps[i]);
  return out;
}

bool is_letter(uint32_t cp) {
  if (cp < 0x80) return (cp | 0x20) >= 'a' && (cp | 0x20) <= 'z';
  return in_ranges(kLetterRanges, kLetterRanges_size, cp);
}

bool is_number(uint32_t cp) {
  if (cp < 0x80) return cp >= '0' && cp <= '9';
  return in_ranges(kNumberRanges, kNumberRanges_size, cp);
}

bool is_whitespace(uint32_t cp) {
  return std::binary_search(kWhitespace, kWhitespace + kWhitespace_size, cp);
}

uint32_t byte_to_codepoint(uint8_t b) { return byte_maps().to_cp[b]; }

const std::string& byte_to_utf8(uint8_t b) { return byte_maps().to_utf8[b]; }

int codepoint_to_byte(uint32_t cp) {
  if ((cp >= 0x21 && cp <= 0x7E) || (cp >= 0xA1 && cp <= 0xAC) || (cp >= 0xAE && cp <= 0xFF)) {
    return static_cast<int>(cp);
  }
  if (cp < 256 || cp >= 256 + 68) return -1;
  const auto& maps = byte_maps();
  for (int b = 0; b < 256; ++b) {
    if (maps.to_cp[b] == cp) return b;
  }
  return -1;
}

size_t incomplete_utf8_tail(std::string_view s) {
  // Look back at most 3 bytes for a lead byte whose sequence runs past the end.
  const size_t n = s.size();
  for (size_t back = 1; back <= 3 && back <= n; ++back) {
    const auto b = static_cast<uint8_t>(s[n - back]);
    if ((b & 0xC0) == 0x80) continue;  // continuation: keep looking for the lead
    if (b < 0xC0 || b >= 0xF8) return 0;
    const size_t need = utf8_len(b) > 1 ? utf8_len(b) : 0;
    return need > back ? back : 0;
  }
  return 0;
}

}  // namespace agentkv::unicode
