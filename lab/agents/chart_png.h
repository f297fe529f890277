// Charts for people: grouped bar charts and line charts rasterized into a PNG, with no dependency
// beyond the C++ standard library (an uncompressed-deflate PNG writer and a built-in bitmap font).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "util/status.h"

namespace agentkv {

struct ChartSeries {
  std::string name;            // legend entry
  std::vector<double> values;  // one per x category
};

struct Chart {
  enum class Kind { kBars, kLines };
  Kind kind = Kind::kBars;
  std::string title;
  std::string y_label;
  std::vector<std::string> x_labels;  // categories (e.g. "round 1" … or "overall")
  std::vector<ChartSeries> series;    // e.g. one per mode
};

// Lays the charts out in a grid (columns panels per row) and writes one PNG. Errors name the path or
// the inconsistent chart (series length != x_labels size, no series, non-finite values).
Status write_charts_png(const std::string& path, const std::vector<Chart>& charts, int columns = 2,
                        int panel_width = 520, int panel_height = 360);

// The PNG encoder underneath: 8-bit RGB, rows top to bottom, rgb.size() == width * height * 3.
Status write_png_rgb(const std::string& path, int width, int height, const std::vector<uint8_t>& rgb);

}  // namespace agentkv
