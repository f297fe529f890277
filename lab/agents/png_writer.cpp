// PNG encoder (RFC 2083 / ISO 15948): 8-bit RGB, filter type 1 (Sub) on every row, deflated by zlib.
// Charts are flat colours: Sub turns each run of one colour into zeros, which deflate shrinks ~50x,
// so a chart is small enough to commit beside the benchmark it shows.
#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include <zlib.h>

#include "chart_png.h"

namespace agentkv {
namespace {

constexpr size_t kMaxIdatChunk = 1u << 20;  // any split is valid; bounded chunks keep lengths small

void put_be32(std::vector<uint8_t>* out, uint32_t v) {
  out->push_back(static_cast<uint8_t>(v >> 24));
  out->push_back(static_cast<uint8_t>(v >> 16));
  out->push_back(static_cast<uint8_t>(v >> 8));
  out->push_back(static_cast<uint8_t>(v));
}

// Chunk = length, type, data, CRC over type and data.
void append_chunk(std::vector<uint8_t>* png, const char (&type)[5], const uint8_t* data, size_t n) {
  put_be32(png, static_cast<uint32_t>(n));
  size_t crc_start = png->size();
  png->insert(png->end(), type, type + 4);
  png->insert(png->end(), data, data + n);
  put_be32(png, static_cast<uint32_t>(
                    ::crc32(0L, png->data() + crc_start, static_cast<uInt>(png->size() - crc_start))));
}

// RFC 1950 zlib stream at the best compression.
Result<std::vector<uint8_t>> zlib_deflate(const std::vector<uint8_t>& raw) {
  uLongf n = compressBound(static_cast<uLong>(raw.size()));
  std::vector<uint8_t> z(n);
  const int rc = compress2(z.data(), &n, raw.data(), static_cast<uLong>(raw.size()), Z_BEST_COMPRESSION);
  if (rc != Z_OK) return make_error("png: zlib compress2 failed (" + std::to_string(rc) + ")");
  z.resize(n);
  return z;
}

Result<std::vector<uint8_t>> encode_png(int width, int height, const std::vector<uint8_t>& rgb) {
  const size_t row_bytes = static_cast<size_t>(width) * 3;
  std::vector<uint8_t> raw;
  raw.reserve((row_bytes + 1) * static_cast<size_t>(height));
  for (size_t y = 0; y < static_cast<size_t>(height); ++y) {
    raw.push_back(1);  // filter type Sub: each byte minus the same channel of the pixel to its left
    const uint8_t* row = rgb.data() + y * row_bytes;
    for (size_t i = 0; i < row_bytes; ++i) raw.push_back(static_cast<uint8_t>(row[i] - (i >= 3 ? row[i - 3] : 0)));
  }
  auto deflated = zlib_deflate(raw);
  if (!deflated.ok()) return make_error(deflated.error());
  const std::vector<uint8_t>& z = *deflated;

  std::vector<uint8_t> png = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
  png.reserve(z.size() + z.size() / kMaxIdatChunk * 12 + 64);
  std::vector<uint8_t> ihdr;
  put_be32(&ihdr, static_cast<uint32_t>(width));
  put_be32(&ihdr, static_cast<uint32_t>(height));
  ihdr.insert(ihdr.end(), {8, 2, 0, 0, 0});  // bit depth 8, RGB, deflate, adaptive filters, no interlace
  append_chunk(&png, "IHDR", ihdr.data(), ihdr.size());
  for (size_t pos = 0; pos < z.size(); pos += kMaxIdatChunk)
    append_chunk(&png, "IDAT", z.data() + pos, std::min(kMaxIdatChunk, z.size() - pos));
  append_chunk(&png, "IEND", nullptr, 0);
  return png;
}

}  // namespace

Status write_png_rgb(const std::string& path, int width, int height, const std::vector<uint8_t>& rgb) {
  if (width < 1 || height < 1)
    return make_error("png: image size " + std::to_string(width) + "x" + std::to_string(height) + " for '" +
                      path + "' must be at least 1x1");
  const uint64_t expected = static_cast<uint64_t>(width) * static_cast<uint64_t>(height) * 3;
  if (rgb.size() != expected)
    return make_error("png: rgb buffer for '" + path + "' has " + std::to_string(rgb.size()) + " bytes but " +
                      std::to_string(width) + "x" + std::to_string(height) + " RGB needs " +
                      std::to_string(expected));

  auto encoded = encode_png(width, height, rgb);
  if (!encoded.ok()) return make_error(encoded.error() + " for '" + path + "'");
  const std::vector<uint8_t>& png = *encoded;
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return make_error("png: cannot open '" + path + "' for writing: " + std::strerror(errno));
  const bool wrote_all = std::fwrite(png.data(), 1, png.size(), f) == png.size();
  const int write_errno = errno;
  const bool closed = std::fclose(f) == 0;
  if (!wrote_all) return make_error("png: short write to '" + path + "': " + std::strerror(write_errno));
  if (!closed) return make_error("png: cannot finish writing '" + path + "': " + std::strerror(errno));
  return Status::ok_status();
}

}  // namespace agentkv
