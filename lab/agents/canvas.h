// An RGB raster with the few primitives charts need: rectangles, thick lines, markers and bitmap
// text. Every primitive clips to the canvas, so callers may draw partly outside it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

namespace agentkv {

struct Rgb {
  uint8_t r = 0, g = 0, b = 0;
  bool operator==(const Rgb&) const = default;
};

inline constexpr Rgb kWhite{255, 255, 255};

// Distinct series colours, cycling after the palette runs out.
Rgb palette_color(size_t series_index);

enum class Marker { kCircle, kSquare, kDiamond, kTriangle };
Marker palette_marker(size_t series_index);

class Canvas {
 public:
  Canvas(int width, int height, Rgb background);

  int width() const { return width_; }
  int height() const { return height_; }
  const std::vector<uint8_t>& rgb() const { return rgb_; }
  Rgb at(int x, int y) const;

  void set(int x, int y, Rgb c);
  void fill_rect(int x, int y, int w, int h, Rgb c);
  void outline_rect(int x, int y, int w, int h, Rgb c);
  // A line `thickness` pixels wide between pixel centres (x0, y0) and (x1, y1).
  void line(int x0, int y0, int x1, int y1, int thickness, Rgb c);
  void marker(int cx, int cy, int radius, Marker shape, Rgb c);
  // Text with its top-left corner at (x, y); each font pixel becomes a scale x scale square.
  void text(int x, int y, std::string_view s, int scale, Rgb c);
  // Text rotated 90 degrees counter-clockwise, reading bottom to top, starting at (x, y) = its
  // bottom-left corner.
  void text_up(int x, int y, std::string_view s, int scale, Rgb c);

 private:
  int width_;
  int height_;
  std::vector<uint8_t> rgb_;
};

}  // namespace agentkv
