// A built-in 5x8 bitmap font for printable ASCII (32..126), so charts need no font files.
// Glyph rows 0..6 hold capitals and digits; row 7 holds descenders (g, j, p, q, y, comma).
#pragma once

#include <cstdint>
#include <string_view>

namespace agentkv {

inline constexpr int kGlyphWidth = 5;
inline constexpr int kGlyphHeight = 8;
inline constexpr int kGlyphAdvance = kGlyphWidth + 1;  // one blank column between characters

// Eight row bitmaps for c, top row first; bit 4 is the leftmost column. Characters outside 32..126
// map to '?'.
const uint8_t* glyph_rows(char c);

// Width in pixels of text drawn at `scale` (no trailing gap after the last character).
int text_width(std::string_view text, int scale);

}  // namespace agentkv
