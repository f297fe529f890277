// Chart layout and rendering: validation, the panel grid, and per panel a title, a legend, a value
// axis with round ticks, category labels and the bars or lines themselves.
#include "chart_png.h"

#include <algorithm>
#include <cmath>
#include <string_view>

#include "bitmap_font.h"
#include "canvas.h"
#include "chart_axis.h"

namespace agentkv {
namespace {

constexpr int kMaxColumns = 16;
constexpr int kMinPanelWidth = 200, kMaxPanelWidth = 4096;
constexpr int kMinPanelHeight = 150, kMaxPanelHeight = 4096;
constexpr int64_t kMaxImagePixels = int64_t{1} << 26;  // 64 Mpx, 192 MiB of RGB
// Beyond this the axis arithmetic (ceil(hi / step) * step) can overflow; no benchmark gets near it.
constexpr double kMaxAbsValue = 1e100;

constexpr Rgb kTitleColor{25, 25, 25};
constexpr Rgb kTextColor{60, 60, 60};
constexpr Rgb kAxisColor{90, 90, 90};
constexpr Rgb kGridColor{228, 228, 228};
constexpr Rgb kFrameColor{210, 210, 210};

constexpr int kPad = 12;  // panel edge to content
constexpr int kTextHeight = kGlyphHeight;
constexpr int kLegendRowHeight = 14;
constexpr int kLegendSwatch = 10;
constexpr int kLineThickness = 2;
constexpr int kMarkerRadius = 3;

std::string describe(const Chart& chart, size_t index) {
  return "chart " + std::to_string(index) + " \"" + chart.title + "\"";
}

Status validate_chart(const Chart& chart, size_t index) {
  if (chart.x_labels.empty()) return make_error("chart: " + describe(chart, index) + " has no x labels");
  if (chart.series.empty()) return make_error("chart: " + describe(chart, index) + " has no series");
  for (const ChartSeries& s : chart.series) {
    const std::string where = "chart: " + describe(chart, index) + " series \"" + s.name + "\"";
    if (s.values.size() != chart.x_labels.size())
      return make_error(where + " has " + std::to_string(s.values.size()) + " values but the chart has " +
                        std::to_string(chart.x_labels.size()) + " x labels");
    for (size_t i = 0; i < s.values.size(); ++i) {
      if (!std::isfinite(s.values[i]))
        return make_error(where + " value " + std::to_string(i) + " is not finite");
      if (std::abs(s.values[i]) > kMaxAbsValue)
        return make_error(where + " value " + std::to_string(i) + " is beyond the plottable range +-1e100");
    }
  }
  return Status::ok_status();
}

// s cut to at most max_width pixels, ending in ".." when shortened.
std::string fit_text(const std::string& s, int max_width, int scale) {
  const size_t fits = static_cast<size_t>(std::max(max_width / scale + 1, 0) / kGlyphAdvance);
  if (s.size() <= fits) return s;
  return fits < 3 ? std::string() : s.substr(0, fits - 2) + "..";
}

int round_px(double v) { return static_cast<int>(std::lround(v)); }

struct Rect {
  int x = 0, y = 0, w = 0, h = 0;
  int right() const { return x + w; }
  int bottom() const { return y + h; }
};

// The panel's value range: bars grow from zero; lines start at zero when the data come close to it.
AxisScale value_axis(const Chart& chart) {
  double lo = chart.series[0].values[0], hi = lo;
  for (const ChartSeries& s : chart.series) {
    for (double v : s.values) {
      lo = std::min(lo, v);
      hi = std::max(hi, v);
    }
  }
  if (chart.kind == Chart::Kind::kBars || (lo > 0 && lo <= hi * 0.5) || (hi < 0 && hi >= lo * 0.5)) {
    lo = std::min(lo, 0.0);
    hi = std::max(hi, 0.0);
  }
  return nice_axis(lo, hi);
}

class PanelRenderer {
 public:
  PanelRenderer(Canvas* canvas, const Chart& chart, Rect panel)
      : cv_(*canvas), chart_(chart), panel_(panel) {}

  void draw() {
    cv_.outline_rect(panel_.x + 2, panel_.y + 2, panel_.w - 4, panel_.h - 4, kFrameColor);
    int top = draw_title(panel_.y + kPad);
    top = draw_legend(top + 8);
    layout_plot(top + 10);
    draw_axis();
    draw_x_labels();
    if (chart_.kind == Chart::Kind::kBars) {
      draw_bars();
    } else {
      draw_lines();
    }
  }

 private:
  int content_width() const { return panel_.w - 2 * kPad; }

  // Returns the y just below the title.
  int draw_title(int y) {
    if (chart_.title.empty()) return y;
    const int scale = text_width(chart_.title, 2) <= content_width() ? 2 : 1;
    const std::string title = fit_text(chart_.title, content_width(), scale);
    cv_.text(panel_.x + (panel_.w - text_width(title, scale)) / 2, y, title, scale, kTitleColor);
    return y + kTextHeight * scale;
  }

  // Entries flow left to right and wrap; returns the y just below the legend.
  int draw_legend(int y) {
    const int left = panel_.x + kPad, right = panel_.x + panel_.w - kPad;
    int x = left;
    for (size_t i = 0; i < chart_.series.size(); ++i) {
      const int max_name = content_width() - kLegendSwatch - 4;
      const std::string name = fit_text(chart_.series[i].name, max_name, 1);
      const int entry_width = kLegendSwatch + 4 + text_width(name, 1);
      if (x > left && x + entry_width > right) {
        x = left;
        y += kLegendRowHeight;
      }
      draw_legend_swatch(x, y, i);
      cv_.text(x + kLegendSwatch + 4, y + 1, name, 1, kTextColor);
      x += entry_width + 14;
    }
    return y + kLegendRowHeight;
  }

  void draw_legend_swatch(int x, int y, size_t series) {
    const Rgb c = palette_color(series);
    if (chart_.kind == Chart::Kind::kBars) {
      cv_.fill_rect(x, y, kLegendSwatch, kLegendSwatch, c);
    } else {
      cv_.line(x, y + kLegendSwatch / 2, x + kLegendSwatch - 1, y + kLegendSwatch / 2, kLineThickness, c);
      cv_.marker(x + kLegendSwatch / 2, y + kLegendSwatch / 2, kMarkerRadius, palette_marker(series), c);
    }
  }

  void layout_plot(int top) {
    axis_ = value_axis(chart_);
    tick_labels_.clear();
    int tick_width = 0;
    for (int i = 0; i <= axis_.intervals(); ++i) {
      tick_labels_.push_back(format_tick(axis_.lo + i * axis_.step, axis_.step));
      tick_width = std::max(tick_width, text_width(tick_labels_.back(), 1));
    }
    int left = panel_.x + kPad + tick_width + 8;
    if (!chart_.y_label.empty()) left += kTextHeight + 8;
    const int right = panel_.x + panel_.w - kPad - 4;
    plot_.x = left;
    plot_.w = std::max(right - left, 1);
    slot_ = static_cast<double>(plot_.w) / static_cast<double>(chart_.x_labels.size());

    // Category labels take one row, or two staggered rows when neighbours would collide.
    int widest = 0;
    for (const std::string& label : chart_.x_labels) widest = std::max(widest, text_width(label, 1));
    label_rows_ = (widest <= slot_ - 6 || chart_.x_labels.size() == 1) ? 1 : 2;
    const int bottom = panel_.y + panel_.h - kPad - label_rows_ * (kTextHeight + 4) - 4;
    plot_.y = top;
    plot_.h = std::max(bottom - top, 1);
  }

  int y_of(double v) const {
    return plot_.bottom() - round_px((v - axis_.lo) / (axis_.hi - axis_.lo) * plot_.h);
  }

  void draw_axis() {
    for (int i = 0; i <= axis_.intervals(); ++i) {
      const int y = y_of(axis_.lo + i * axis_.step);
      cv_.fill_rect(plot_.x + 1, y, plot_.w, 1, kGridColor);
      cv_.fill_rect(plot_.x - 4, y, 4, 1, kAxisColor);
      const std::string& label = tick_labels_[static_cast<size_t>(i)];
      cv_.text(plot_.x - 7 - text_width(label, 1), y - kTextHeight / 2 + 1, label, 1, kTextColor);
    }
    cv_.fill_rect(plot_.x, plot_.y, 1, plot_.h + 1, kAxisColor);
    const int baseline = axis_.lo <= 0 && axis_.hi >= 0 ? y_of(0) : plot_.bottom();
    cv_.fill_rect(plot_.x, baseline, plot_.w + 1, 1, kAxisColor);
    if (!chart_.y_label.empty()) {
      const std::string label = fit_text(chart_.y_label, plot_.h, 1);
      const int x = panel_.x + kPad;
      cv_.text_up(x, plot_.y + (plot_.h + text_width(label, 1)) / 2, label, 1, kTextColor);
    }
  }

  double slot_center(size_t i) const { return plot_.x + slot_ * (static_cast<double>(i) + 0.5); }

  void draw_x_labels() {
    const int avail = round_px(slot_ * label_rows_) - 6;
    for (size_t i = 0; i < chart_.x_labels.size(); ++i) {
      const std::string label = fit_text(chart_.x_labels[i], std::max(avail, 0), 1);
      const int row = static_cast<int>(i % static_cast<size_t>(label_rows_));
      const int y = plot_.bottom() + 6 + row * (kTextHeight + 4);
      cv_.text(round_px(slot_center(i)) - text_width(label, 1) / 2, y, label, 1, kTextColor);
    }
  }

  void draw_bars() {
    const size_t n = chart_.series.size();
    const double group = slot_ * 0.8;
    const double bar = group / static_cast<double>(n);
    const int gap = bar >= 6 ? 1 : 0;
    const int zero = y_of(std::clamp(0.0, axis_.lo, axis_.hi));
    // Label every bar or none: a chart with only some bars labelled reads as if values were missing.
    int widest_label = 0;
    for (const ChartSeries& series : chart_.series)
      for (double v : series.values) widest_label = std::max(widest_label, text_width(format_value(v), 1));
    const bool labelled = widest_label <= static_cast<int>(bar) - gap - 2;
    for (size_t g = 0; g < chart_.x_labels.size(); ++g) {
      const double start = plot_.x + slot_ * static_cast<double>(g) + slot_ * 0.1;
      for (size_t s = 0; s < n; ++s) {
        const double v = chart_.series[s].values[g];
        const int x0 = round_px(start + bar * static_cast<double>(s)) + 1;
        const int x1 = std::max(round_px(start + bar * static_cast<double>(s + 1)) - gap, x0 + 1);
        int top = std::min(zero, y_of(v)), bottom = std::max(zero, y_of(v));
        if (v != 0 && top == bottom) {  // a tiny non-zero value stays visible
          if (v > 0)
            --top;
          else
            ++bottom;
        }
        cv_.fill_rect(x0, top, x1 - x0, bottom - top, palette_color(s));
        if (labelled) draw_bar_value(x0, x1, v > 0 ? top : bottom, v);
      }
    }
  }

  // The value above a positive bar (below a negative one); the gap between legend and plot leaves
  // room above a bar that reaches the top tick.
  void draw_bar_value(int x0, int x1, int end_y, double v) {
    const std::string label = format_value(v);
    const int w = text_width(label, 1);
    const int y = v >= 0 ? end_y - kTextHeight - 2 : end_y + 3;
    if (y + kTextHeight > plot_.bottom() + 1) return;
    cv_.text((x0 + x1 - w) / 2, y, label, 1, kTextColor);
  }

  void draw_lines() {
    for (size_t s = 0; s < chart_.series.size(); ++s) {
      const Rgb c = palette_color(s);
      const std::vector<double>& values = chart_.series[s].values;
      for (size_t i = 1; i < values.size(); ++i) {
        cv_.line(round_px(slot_center(i - 1)), y_of(values[i - 1]), round_px(slot_center(i)), y_of(values[i]),
                 kLineThickness, c);
      }
      for (size_t i = 0; i < values.size(); ++i)
        cv_.marker(round_px(slot_center(i)), y_of(values[i]), kMarkerRadius, palette_marker(s), c);
    }
  }

  Canvas& cv_;
  const Chart& chart_;
  Rect panel_;
  Rect plot_;
  AxisScale axis_;
  std::vector<std::string> tick_labels_;
  double slot_ = 1;  // pixels per category
  int label_rows_ = 1;
};

}  // namespace

Status write_charts_png(const std::string& path, const std::vector<Chart>& charts, int columns,
                        int panel_width, int panel_height) {
  if (charts.empty()) return make_error("chart: no charts to draw into '" + path + "'");
  if (columns < 1 || columns > kMaxColumns)
    return make_error("chart: columns " + std::to_string(columns) + " out of range [1, " +
                      std::to_string(kMaxColumns) + "]");
  if (panel_width < kMinPanelWidth || panel_width > kMaxPanelWidth)
    return make_error("chart: panel_width " + std::to_string(panel_width) + " out of range [" +
                      std::to_string(kMinPanelWidth) + ", " + std::to_string(kMaxPanelWidth) + "]");
  if (panel_height < kMinPanelHeight || panel_height > kMaxPanelHeight)
    return make_error("chart: panel_height " + std::to_string(panel_height) + " out of range [" +
                      std::to_string(kMinPanelHeight) + ", " + std::to_string(kMaxPanelHeight) + "]");
  for (size_t i = 0; i < charts.size(); ++i) AGENTKV_TRY(validate_chart(charts[i], i));

  const int64_t cols = std::min<int64_t>(columns, static_cast<int64_t>(charts.size()));
  const int64_t rows = (static_cast<int64_t>(charts.size()) + cols - 1) / cols;
  const int64_t width = cols * panel_width, height = rows * panel_height;
  if (width * height > kMaxImagePixels)
    return make_error("chart: " + std::to_string(charts.size()) + " charts make a " + std::to_string(width) +
                      "x" + std::to_string(height) + " image, over the limit of " +
                      std::to_string(kMaxImagePixels) + " pixels");

  Canvas canvas(static_cast<int>(width), static_cast<int>(height), kWhite);
  for (size_t i = 0; i < charts.size(); ++i) {
    const int64_t col = static_cast<int64_t>(i) % cols, row = static_cast<int64_t>(i) / cols;
    const Rect panel{static_cast<int>(col * panel_width), static_cast<int>(row * panel_height), panel_width,
                     panel_height};
    PanelRenderer(&canvas, charts[i], panel).draw();
  }
  return write_png_rgb(path, canvas.width(), canvas.height(), canvas.rgb());
}

}  // namespace agentkv
