// PNG encoder (RFC 2083 / ISO 15948): 8-bit RGB, filter type 0 on every row, and a zlib stream of
// stored (uncompressed) deflate blocks. Charts are small, so size is traded for having no codec.
#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "chart_png.h"

namespace agentkv {
namespace {

constexpr size_t kMaxStoredBlock = 65535;   // LEN is 16 bits
constexpr size_t kMaxIdatChunk = 1u << 20;  // any split is valid; bounded chunks keep lengths small

constexpr std::array<uint32_t, 256> make_crc_table() {
  std::array<uint32_t, 256> table{};
  for (uint32_t n = 0; n < 256; ++n) {
    uint32_t c = n;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
    table[n] = c;
  }
  return table;
}

constexpr std::array<uint32_t, 256> kCrcTable = make_crc_table();

uint32_t crc32(const uint8_t* data, size_t n) {
  uint32_t c = 0xFFFFFFFFu;
  for (size_t i = 0; i < n; ++i) c = kCrcTable[(c ^ data[i]) & 0xFF] ^ (c >> 8);
  return c ^ 0xFFFFFFFFu;
}

uint32_t adler32(const std::vector<uint8_t>& data) {
  constexpr uint32_t kMod = 65521;
  constexpr size_t kBlock = 5552;  // largest run before b can overflow 32 bits
  uint32_t a = 1, b = 0;
  for (size_t i = 0; i < data.size();) {
    size_t end = std::min(data.size(), i + kBlock);
    for (; i < end; ++i) {
      a += data[i];
      b += a;
    }
    a %= kMod;
    b %= kMod;
  }
  return (b << 16) | a;
}

void put_be32(std::vector<uint8_t>* out, uint32_t v) {
  out->push_back(static_cast<uint8_t>(v >> 24));
  out->push_back(static_cast<uint8_t>(v >> 16));
  out->push_back(static_cast<uint8_t>(v >> 8));
  out->push_back(static_cast<uint8_t>(v));
}

void put_le16(std::vector<uint8_t>* out, uint32_t v) {
  out->push_back(static_cast<uint8_t>(v));
  out->push_back(static_cast<uint8_t>(v >> 8));
}

// Chunk = length, type, data, CRC over type and data.
void append_chunk(std::vector<uint8_t>* png, const char (&type)[5], const uint8_t* data, size_t n) {
  put_be32(png, static_cast<uint32_t>(n));
  size_t crc_start = png->size();
  png->insert(png->end(), type, type + 4);
  png->insert(png->end(), data, data + n);
  put_be32(png, crc32(png->data() + crc_start, png->size() - crc_start));
}

// RFC 1950 header, RFC 1951 stored blocks, Adler-32 of the uncompressed bytes.
std::vector<uint8_t> zlib_stored(const std::vector<uint8_t>& raw) {
  std::vector<uint8_t> z;
  z.reserve(raw.size() + raw.size() / kMaxStoredBlock * 5 + 16);
  z.push_back(0x78);  // deflate, 32 KiB window
  z.push_back(0x01);  // no dictionary; (0x78 << 8 | 0x01) % 31 == 0
  size_t pos = 0;
  do {
    size_t len = std::min(kMaxStoredBlock, raw.size() - pos);
    bool final_block = pos + len == raw.size();
    z.push_back(final_block ? 1 : 0);  // BFINAL, BTYPE = 00; the header byte ends on a boundary
    put_le16(&z, static_cast<uint32_t>(len));
    put_le16(&z, static_cast<uint32_t>(~len & 0xFFFF));
    z.insert(z.end(), raw.begin() + static_cast<std::ptrdiff_t>(pos),
             raw.begin() + static_cast<std::ptrdiff_t>(pos + len));
    pos += len;
  } while (pos < raw.size());
  put_be32(&z, adler32(raw));
  return z;
}

std::vector<uint8_t> encode_png(int width, int height, const std::vector<uint8_t>& rgb) {
  const size_t row_bytes = static_cast<size_t>(width) * 3;
  std::vector<uint8_t> raw;
  raw.reserve((row_bytes + 1) * static_cast<size_t>(height));
  for (size_t y = 0; y < static_cast<size_t>(height); ++y) {
    raw.push_back(0);  // filter type None
    const uint8_t* row = rgb.data() + y * row_bytes;
    raw.insert(raw.end(), row, row + row_bytes);
  }
  std::vector<uint8_t> z = zlib_stored(raw);

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

  std::vector<uint8_t> png = encode_png(width, height, rgb);
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
