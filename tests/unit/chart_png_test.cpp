// The PNG writer is checked by a decoder written here (bitwise CRC-32, naive Adler-32, PNG filters
// undone by hand) over zlib's own inflate; charts are checked by sampling the decoded pixels.
#include "lab/agents/chart_png.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <limits>
#include <string>
#include <vector>

#include <zlib.h>

#include "lab/agents/canvas.h"
#include "lab/agents/chart_axis.h"

namespace agentkv {
namespace {

using Bytes = std::vector<uint8_t>;

uint32_t be32(const uint8_t* p) {
  return uint32_t{p[0]} << 24 | uint32_t{p[1]} << 16 | uint32_t{p[2]} << 8 | uint32_t{p[3]};
}

uint32_t bitwise_crc32(const uint8_t* p, size_t n) {
  uint32_t c = 0xFFFFFFFFu;
  for (size_t i = 0; i < n; ++i) {
    c ^= p[i];
    for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0xEDB88320u & (0u - (c & 1)));
  }
  return ~c;
}

uint32_t naive_adler32(const Bytes& data) {
  uint32_t a = 1, b = 0;
  for (uint8_t byte : data) {
    a = (a + byte) % 65521;
    b = (b + a) % 65521;
  }
  return b << 16 | a;
}

struct DecodedPng {
  int width = 0;
  int height = 0;
  Bytes rgb;
  int idat_chunks = 0;

  Rgb at(int x, int y) const {
    const uint8_t* p =
        &rgb[(static_cast<size_t>(y) * static_cast<size_t>(width) + static_cast<size_t>(x)) * 3];
    return Rgb{p[0], p[1], p[2]};
  }
};

// Accepts exactly what the writer promises: IHDR (8-bit RGB), IDAT chunks holding one zlib stream,
// an empty IEND at the end, filter type 0 or 1 (Sub) on every row.
Result<DecodedPng> decode_png(const Bytes& file) {
  static const uint8_t kSignature[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
  if (file.size() < 8 || !std::equal(kSignature, kSignature + 8, file.begin()))
    return make_error("bad signature");
  DecodedPng png;
  Bytes z;
  bool seen_ihdr = false, seen_iend = false;
  for (size_t pos = 8; pos < file.size();) {
    if (seen_iend) return make_error("bytes after IEND");
    if (file.size() - pos < 12) return make_error("truncated chunk header");
    const uint32_t len = be32(&file[pos]);
    if (file.size() - pos - 12 < len) return make_error("truncated chunk");
    const std::string type(file.begin() + static_cast<std::ptrdiff_t>(pos + 4),
                           file.begin() + static_cast<std::ptrdiff_t>(pos + 8));
    const uint8_t* data = &file[pos + 8];
    if (bitwise_crc32(&file[pos + 4], len + 4) != be32(data + len)) return make_error("bad CRC in " + type);
    if (type == "IHDR") {
      if (seen_ihdr || pos != 8 || len != 13) return make_error("misplaced or malformed IHDR");
      seen_ihdr = true;
      png.width = static_cast<int>(be32(data));
      png.height = static_cast<int>(be32(data + 4));
      if (data[8] != 8 || data[9] != 2 || data[10] != 0 || data[11] != 0 || data[12] != 0)
        return make_error("IHDR is not 8-bit RGB, deflate, filter 0, no interlace");
    } else if (type == "IDAT") {
      if (!seen_ihdr) return make_error("IDAT before IHDR");
      z.insert(z.end(), data, data + len);
      ++png.idat_chunks;
    } else if (type == "IEND") {
      if (len != 0) return make_error("IEND with data");
      seen_iend = true;
    } else {
      return make_error("unexpected chunk " + type);
    }
    pos += 12 + len;
  }
  if (!seen_iend) return make_error("no IEND");

  if (z.size() < 6) return make_error("zlib stream too short");
  if ((z[0] & 0x0F) != 8 || (z[0] * 256 + z[1]) % 31 != 0 || (z[1] & 0x20) != 0)
    return make_error("bad zlib header");
  const size_t row_bytes = static_cast<size_t>(png.width) * 3;
  Bytes raw((row_bytes + 1) * static_cast<size_t>(png.height) + 1);  // one spare byte: too long fails
  uLongf n = static_cast<uLongf>(raw.size());
  if (uncompress(raw.data(), &n, z.data(), static_cast<uLong>(z.size())) != Z_OK)
    return make_error("the zlib stream does not inflate");
  raw.resize(n);
  if (be32(&z[z.size() - 4]) != naive_adler32(raw)) return make_error("bad Adler-32");

  if (raw.size() != (row_bytes + 1) * static_cast<size_t>(png.height))
    return make_error("wrong image data size");
  for (size_t y = 0; y < static_cast<size_t>(png.height); ++y) {
    const auto row = raw.begin() + static_cast<std::ptrdiff_t>(y * (row_bytes + 1));
    if (*row > 1) return make_error("row filter is neither 0 nor 1");
    const size_t at = png.rgb.size();
    png.rgb.insert(png.rgb.end(), row + 1, row + 1 + static_cast<std::ptrdiff_t>(row_bytes));
    if (*row == 1)  // Sub: add the same channel of the decoded pixel to the left
      for (size_t i = 3; i < row_bytes; ++i) png.rgb[at + i] = static_cast<uint8_t>(png.rgb[at + i] + png.rgb[at + i - 3]);
  }
  return png;
}

std::string temp_png(const std::string& name) { return ::testing::TempDir() + "agentkv_" + name + ".png"; }

Bytes read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return Bytes(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

DecodedPng decode_file(const std::string& path) {
  Result<DecodedPng> png = decode_png(read_file(path));
  EXPECT_TRUE(png.ok()) << path << ": " << png.error();
  std::remove(path.c_str());
  return png.ok() ? std::move(png).value() : DecodedPng{};
}

void expect_error_mentions(const Status& st, const std::vector<std::string>& parts) {
  ASSERT_FALSE(st.ok());
  for (const std::string& part : parts) EXPECT_NE(st.error().find(part), std::string::npos) << st.error();
}

TEST(PngWriter, TinyImageRoundTrips) {
  const Bytes rgb = {255, 0,  0,  0, 255, 0, 0,   0,   255,  //
                     10,  20, 30, 0, 0,   0, 255, 255, 255};
  const std::string path = temp_png("tiny");
  ASSERT_TRUE(write_png_rgb(path, 3, 2, rgb).ok());
  const Bytes file = read_file(path);
  // Every PNG ends with the same empty IEND chunk, whose CRC is the well-known AE 42 60 82.
  ASSERT_GE(file.size(), 12u);
  EXPECT_EQ(be32(&file[file.size() - 4]), 0xAE426082u);
  DecodedPng png = decode_file(path);
  EXPECT_EQ(png.width, 3);
  EXPECT_EQ(png.height, 2);
  EXPECT_EQ(png.rgb, rgb);
  EXPECT_EQ(png.idat_chunks, 1);
}

TEST(PngWriter, LargeImageSpansIdatChunks) {
  // 1.26 MB of scanlines of a pattern deflate cannot shrink much: more than 1 MiB deflated, so 2 IDAT
  // chunks of <= 1 MiB.
  const int w = 700, h = 600;
  Bytes rgb(static_cast<size_t>(w) * h * 3);
  uint32_t x = 12345;
  for (uint8_t& v : rgb) v = static_cast<uint8_t>((x = x * 1103515245u + 12345u) >> 24);
  const std::string path = temp_png("large");
  ASSERT_TRUE(write_png_rgb(path, w, h, rgb).ok());
  DecodedPng png = decode_file(path);
  EXPECT_EQ(png.width, w);
  EXPECT_EQ(png.height, h);
  EXPECT_EQ(png.idat_chunks, 2);
  EXPECT_TRUE(png.rgb == rgb);
}

TEST(PngWriter, FlatColoursDeflateSmall) {
  const int w = 800, h = 400;
  Bytes rgb(static_cast<size_t>(w) * h * 3, 255);
  for (int y = 100; y < 300; ++y)
    for (int x = 200; x < 600; ++x) rgb[(static_cast<size_t>(y) * w + x) * 3] = 30;
  const std::string path = temp_png("flat");
  ASSERT_TRUE(write_png_rgb(path, w, h, rgb).ok());
  EXPECT_LT(read_file(path).size(), rgb.size() / 100);
  DecodedPng png = decode_file(path);
  EXPECT_TRUE(png.rgb == rgb);
}

TEST(PngWriter, RejectsBadSizesAndNamesThePath) {
  expect_error_mentions(write_png_rgb(temp_png("bad"), 2, 2, Bytes(11)), {"11 bytes", "needs 12", "bad.png"});
  expect_error_mentions(write_png_rgb(temp_png("bad"), 0, 2, Bytes()), {"0x2", "bad.png"});
  expect_error_mentions(write_png_rgb("/nonexistent-dir/x.png", 1, 1, Bytes(3)), {"/nonexistent-dir/x.png"});
}

TEST(ChartAxis, NiceTicksUseOneTwoFiveSteps) {
  AxisScale a = nice_axis(0, 87);
  EXPECT_DOUBLE_EQ(a.lo, 0);
  EXPECT_DOUBLE_EQ(a.step, 20);
  EXPECT_DOUBLE_EQ(a.hi, 100);
  EXPECT_EQ(a.intervals(), 5);

  a = nice_axis(0, 0.23);
  EXPECT_DOUBLE_EQ(a.step, 0.05);
  EXPECT_NEAR(a.hi, 0.25, 1e-12);

  a = nice_axis(-130, 480);
  EXPECT_DOUBLE_EQ(a.step, 200);
  EXPECT_DOUBLE_EQ(a.lo, -200);
  EXPECT_DOUBLE_EQ(a.hi, 600);

  a = nice_axis(0, 0);  // all zeros still get a positive span
  EXPECT_DOUBLE_EQ(a.lo, 0);
  EXPECT_GT(a.hi, 0);

  a = nice_axis(7, 7);
  EXPECT_LE(a.lo, 7);
  EXPECT_GT(a.hi, 7);
}

TEST(ChartAxis, FormatsTicksCompactly) {
  EXPECT_EQ(format_tick(1200, 200), "1.2k");
  EXPECT_EQ(format_tick(1000, 500), "1k");
  EXPECT_EQ(format_tick(3.5e6, 5e5), "3.5M");
  EXPECT_EQ(format_tick(2e9, 1e9), "2G");
  EXPECT_EQ(format_tick(0.25, 0.05), "0.25");
  EXPECT_EQ(format_tick(0.3 * 3, 0.3), "0.9");
  EXPECT_EQ(format_tick(40, 10), "40");
  EXPECT_EQ(format_tick(-1500, 500), "-1.5k");
  EXPECT_EQ(format_tick(1e-17, 0.1), "0");
  EXPECT_EQ(format_value(1234), "1.23k");
  EXPECT_EQ(format_value(0.00456), "0.00456");
  EXPECT_EQ(format_value(42), "42");
}

// Columns (x) that hold pixels of colour c, each with how many such pixels.
std::vector<int> column_counts(const DecodedPng& png, Rgb c) {
  std::vector<int> counts(static_cast<size_t>(png.width), 0);
  for (int y = 0; y < png.height; ++y)
    for (int x = 0; x < png.width; ++x)
      if (png.at(x, y) == c) ++counts[static_cast<size_t>(x)];
  return counts;
}

struct ColumnRun {
  int x0, x1, height;  // [x0, x1) and the most colour pixels in one column
};

// Horizontal runs of columns containing colour c that are wider than min_width (legend swatches are 10 px).
std::vector<ColumnRun> wide_runs(const DecodedPng& png, Rgb c, int min_width) {
  const std::vector<int> counts = column_counts(png, c);
  std::vector<ColumnRun> runs;
  for (int x = 0; x < png.width;) {
    if (counts[static_cast<size_t>(x)] == 0) {
      ++x;
      continue;
    }
    ColumnRun r{x, x, 0};
    for (; x < png.width && counts[static_cast<size_t>(x)] > 0; ++x)
      r.height = std::max(r.height, counts[static_cast<size_t>(x)]);
    r.x1 = x;
    if (r.x1 - r.x0 > min_width) runs.push_back(r);
  }
  return runs;
}

TEST(Chart, GroupedBarsAreProportionalToValues) {
  Chart chart;
  chart.title = "Throughput";
  chart.y_label = "tokens/s";
  chart.x_labels = {"round 1", "round 2", "round 3"};
  chart.series = {{"paged", {10, 40, 20}}, {"naive", {30, 5, 15}}};
  const std::string path = temp_png("bars");
  ASSERT_TRUE(write_charts_png(path, {chart}).ok());
  DecodedPng png = decode_file(path);
  ASSERT_EQ(png.width, 520);
  ASSERT_EQ(png.height, 360);

  const std::vector<ColumnRun> first = wide_runs(png, palette_color(0), 20);
  const std::vector<ColumnRun> second = wide_runs(png, palette_color(1), 20);
  ASSERT_EQ(first.size(), 3u);
  ASSERT_EQ(second.size(), 3u);
  // The axis runs 0..40, so heights follow the values to within rounding.
  const double unit = first[1].height / 40.0;
  EXPECT_GT(first[1].height, first[2].height);
  EXPECT_GT(first[2].height, first[0].height);
  EXPECT_NEAR(first[0].height, 10 * unit, 2);
  EXPECT_NEAR(first[2].height, 20 * unit, 2);
  EXPECT_NEAR(second[0].height, 30 * unit, 2);
  EXPECT_NEAR(second[1].height, 5 * unit, 2);
  for (size_t g = 0; g < 3; ++g) EXPECT_LE(first[g].x1, second[g].x0) << "series 1 sits right of series 0";
}

// Mean y of colour-c pixels in column x, or -1 when there are none.
double mean_y(const DecodedPng& png, int x, Rgb c) {
  double sum = 0;
  int n = 0;
  for (int y = 0; y < png.height; ++y)
    if (png.at(x, y) == c) {
      sum += y;
      ++n;
    }
  return n ? sum / n : -1;
}

TEST(Chart, LinesRiseAndFallWithTheirValues) {
  Chart chart;
  chart.kind = Chart::Kind::kLines;
  chart.title = "Latency";
  chart.x_labels = {"1", "2", "3", "4"};
  chart.series = {{"rising", {1, 4, 6, 9}}, {"falling", {9, 5, 3, 1}}};
  const std::string path = temp_png("lines");
  ASSERT_TRUE(write_charts_png(path, {chart}, 2, 400, 300).ok());
  DecodedPng png = decode_file(path);
  ASSERT_EQ(png.width, 400);
  for (size_t s = 0; s < 2; ++s) {
    const Rgb c = palette_color(s);
    // Skip the legend swatches at the panel's left edge; the plot starts further right.
    const std::vector<int> counts = column_counts(png, c);
    int first = -1, last = -1;
    for (int x = 40; x < png.width; ++x) {
      if (counts[static_cast<size_t>(x)] == 0) continue;
      if (first < 0) first = x;
      last = x;
    }
    ASSERT_GE(first, 0) << "series " << s << " not drawn";
    ASSERT_GT(last - first, 200);
    if (s == 0) {
      EXPECT_GT(mean_y(png, first, c), mean_y(png, last, c) + 100) << "rising line ends higher (smaller y)";
    } else {
      EXPECT_LT(mean_y(png, first, c) + 100, mean_y(png, last, c)) << "falling line ends lower";
    }
  }
}

TEST(Chart, GridPlacesPanelsInColumns) {
  Chart chart;
  chart.x_labels = {"overall"};
  chart.series = {{"a", {3}}};
  const std::string path = temp_png("grid");
  ASSERT_TRUE(write_charts_png(path, {chart, chart, chart}, 2, 300, 200).ok());
  DecodedPng png = decode_file(path);
  EXPECT_EQ(png.width, 600);
  EXPECT_EQ(png.height, 400);
  // The third panel (bottom left) has its bar; the empty fourth slot (bottom right) stays white.
  int bottom_left = 0, bottom_right = 0;
  for (int y = 200; y < 400; ++y) {
    for (int x = 0; x < 300; ++x) bottom_left += png.at(x, y) == palette_color(0);
    for (int x = 300; x < 600; ++x) bottom_right += !(png.at(x, y) == kWhite);
  }
  EXPECT_GT(bottom_left, 1000);
  EXPECT_EQ(bottom_right, 0);

  // Fewer charts than columns: the image is only as wide as the charts need.
  ASSERT_TRUE(write_charts_png(path, {chart}, 3, 300, 200).ok());
  EXPECT_EQ(decode_file(path).width, 300);
}

TEST(Chart, AwkwardDataStillRenders) {
  Chart negative;
  negative.x_labels = {"a very long category label that cannot fit", "b", "another long one here", "d"};
  negative.series = {{"s", {-5, 3, 0, 1e-9}},
                     {"a series name far too long for any legend row at all", {1, 2, 3, 4}}};
  Chart flat;
  flat.kind = Chart::Kind::kLines;
  flat.title = "A title that is much too long to fit in the panel at the large scale, or even the small one";
  flat.y_label = "a y label longer than the plot is tall, so it must be cut";
  flat.x_labels = {"x"};
  flat.series = {{"zero", {0}}, {"big", {2.5e12}}};
  const std::string path = temp_png("awkward");
  ASSERT_TRUE(write_charts_png(path, {negative, flat}, 2, 200, 150).ok());
  DecodedPng png = decode_file(path);
  int coloured = 0;
  for (int y = 0; y < png.height; ++y)
    for (int x = 0; x < png.width; ++x) coloured += png.at(x, y) == palette_color(0);
  EXPECT_GT(coloured, 50);
}

TEST(Chart, RejectsInconsistentChartsWithNamedErrors) {
  const std::string path = temp_png("invalid");
  Chart good;
  good.title = "T";
  good.x_labels = {"a", "b"};
  good.series = {{"s", {1, 2}}};
  ASSERT_TRUE(write_charts_png(path, {good}).ok());
  std::remove(path.c_str());

  expect_error_mentions(write_charts_png(path, {}), {"no charts", path});

  Chart no_series = good;
  no_series.series.clear();
  expect_error_mentions(write_charts_png(path, {good, no_series}), {"chart 1", "\"T\"", "no series"});

  Chart no_labels = good;
  no_labels.x_labels.clear();
  expect_error_mentions(write_charts_png(path, {no_labels}), {"no x labels"});

  Chart mismatch = good;
  mismatch.series.push_back({"short", {1, 2, 3}});
  expect_error_mentions(write_charts_png(path, {mismatch}), {"\"short\"", "3 values", "2 x labels"});

  Chart nan = good;
  nan.series[0].values[1] = std::nan("");
  expect_error_mentions(write_charts_png(path, {nan}), {"\"s\"", "value 1", "not finite"});

  Chart inf = good;
  inf.series[0].values[0] = -std::numeric_limits<double>::infinity();
  expect_error_mentions(write_charts_png(path, {inf}), {"value 0", "not finite"});

  Chart huge = good;
  huge.series[0].values[0] = 1e200;
  expect_error_mentions(write_charts_png(path, {huge}), {"value 0", "range"});

  expect_error_mentions(write_charts_png(path, {good}, 0), {"columns 0"});
  expect_error_mentions(write_charts_png(path, {good}, 2, 50), {"panel_width 50"});
  expect_error_mentions(write_charts_png(path, {good}, 2, 520, 100000), {"panel_height 100000"});
  expect_error_mentions(write_charts_png(path, std::vector<Chart>(64, good), 16, 4096, 4096), {"pixels"});
  expect_error_mentions(write_charts_png("/nonexistent-dir/c.png", {good}), {"/nonexistent-dir/c.png"});
  EXPECT_TRUE(read_file(path).empty()) << "no file is written on a validation error";
}

}  // namespace
}  // namespace agentkv
