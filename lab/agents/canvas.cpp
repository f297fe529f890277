#include "canvas.h"

#include <algorithm>
#include <cstdlib>

#include "bitmap_font.h"
#include "util/status.h"

namespace agentkv {
namespace {

// Hues spread around the wheel and alternated in lightness, so neighbours in a legend differ.
constexpr Rgb kPalette[] = {
    {38, 100, 180},   // blue
    {232, 125, 25},   // orange
    {50, 155, 75},    // green
    {205, 45, 55},    // red
    {125, 85, 185},   // purple
    {20, 165, 180},   // teal
    {150, 95, 55},    // brown
    {215, 90, 170},   // magenta
    {120, 120, 120},  // grey
    {170, 165, 30},   // olive
};
constexpr size_t kPaletteSize = sizeof(kPalette) / sizeof(kPalette[0]);

}  // namespace

Rgb palette_color(size_t series_index) { return kPalette[series_index % kPaletteSize]; }

Marker palette_marker(size_t series_index) {
  // Colours cycle first; the shape changes each time they wrap, so series 0 and 10 still differ.
  static constexpr Marker kShapes[] = {Marker::kCircle, Marker::kSquare, Marker::kDiamond, Marker::kTriangle};
  return kShapes[(series_index / kPaletteSize) % 4];
}

Canvas::Canvas(int width, int height, Rgb background) : width_(width), height_(height) {
  AGENTKV_CHECK(width > 0 && height > 0);
  rgb_.resize(static_cast<size_t>(width) * static_cast<size_t>(height) * 3);
  for (size_t i = 0; i < rgb_.size(); i += 3) {
    rgb_[i] = background.r;
    rgb_[i + 1] = background.g;
    rgb_[i + 2] = background.b;
  }
}

Rgb Canvas::at(int x, int y) const {
  AGENTKV_CHECK(x >= 0 && x < width_ && y >= 0 && y < height_);
  const uint8_t* p =
      &rgb_[(static_cast<size_t>(y) * static_cast<size_t>(width_) + static_cast<size_t>(x)) * 3];
  return Rgb{p[0], p[1], p[2]};
}

void Canvas::set(int x, int y, Rgb c) {
  if (x < 0 || y < 0 || x >= width_ || y >= height_) return;
  uint8_t* p = &rgb_[(static_cast<size_t>(y) * static_cast<size_t>(width_) + static_cast<size_t>(x)) * 3];
  p[0] = c.r;
  p[1] = c.g;
  p[2] = c.b;
}

void Canvas::fill_rect(int x, int y, int w, int h, Rgb c) {
  const int x0 = std::max(x, 0), y0 = std::max(y, 0);
  const int x1 = std::min(x + w, width_), y1 = std::min(y + h, height_);
  for (int yy = y0; yy < y1; ++yy)
    for (int xx = x0; xx < x1; ++xx) set(xx, yy, c);
}

void Canvas::outline_rect(int x, int y, int w, int h, Rgb c) {
  fill_rect(x, y, w, 1, c);
  fill_rect(x, y + h - 1, w, 1, c);
  fill_rect(x, y, 1, h, c);
  fill_rect(x + w - 1, y, 1, h, c);
}

void Canvas::line(int x0, int y0, int x1, int y1, int thickness, Rgb c) {
  // Bresenham, stamping a thickness x thickness square at each step.
  const int lo = (thickness - 1) / 2;
  const int dx = std::abs(x1 - x0), dy = -std::abs(y1 - y0);
  const int sx = x0 < x1 ? 1 : -1, sy = y0 < y1 ? 1 : -1;
  int err = dx + dy;
  for (;;) {
    fill_rect(x0 - lo, y0 - lo, thickness, thickness, c);
    if (x0 == x1 && y0 == y1) break;
    const int e2 = 2 * err;
    if (e2 >= dy) {
      err += dy;
      x0 += sx;
    }
    if (e2 <= dx) {
      err += dx;
      y0 += sy;
    }
  }
}

void Canvas::marker(int cx, int cy, int radius, Marker shape, Rgb c) {
  for (int dy = -radius; dy <= radius; ++dy) {
    for (int dx = -radius; dx <= radius; ++dx) {
      bool inside = false;
      switch (shape) {
        case Marker::kCircle:
          inside = dx * dx + dy * dy <= radius * radius + radius;
          break;
        case Marker::kSquare:
          inside = std::abs(dx) < radius && std::abs(dy) < radius;
          break;
        case Marker::kDiamond:
          inside = std::abs(dx) + std::abs(dy) <= radius;
          break;
        case Marker::kTriangle:
          inside = 2 * std::abs(dx) <= dy + radius;
          break;
      }
      if (inside) set(cx + dx, cy + dy, c);
    }
  }
}

void Canvas::text(int x, int y, std::string_view s, int scale, Rgb c) {
  for (size_t i = 0; i < s.size(); ++i) {
    const uint8_t* rows = glyph_rows(s[i]);
    const int left = x + static_cast<int>(i) * kGlyphAdvance * scale;
    for (int row = 0; row < kGlyphHeight; ++row)
      for (int col = 0; col < kGlyphWidth; ++col)
        if (rows[row] & (0x10 >> col)) fill_rect(left + col * scale, y + row * scale, scale, scale, c);
  }
}

void Canvas::text_up(int x, int y, std::string_view s, int scale, Rgb c) {
  // The glyph's top faces left; its columns run upwards from (x, y).
  for (size_t i = 0; i < s.size(); ++i) {
    const uint8_t* rows = glyph_rows(s[i]);
    const int pen = static_cast<int>(i) * kGlyphAdvance;
    for (int row = 0; row < kGlyphHeight; ++row)
      for (int col = 0; col < kGlyphWidth; ++col)
        if (rows[row] & (0x10 >> col))
          fill_rect(x + row * scale, y - (pen + col + 1) * scale + 1, scale, scale, c);
  }
}

}  // namespace agentkv
