// Diff row formats (kv/kv_diff_codec.h): f16 copies, int8 / int4 differences with a scale per head.
#include "kv/kv_diff_codec.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "ops/fp16.h"

namespace agentkv {

namespace {

// Half an f16 ulp at h's magnitude: the most round-to-nearest moves a value that lands on h.
float half_ulp(kv_t h) {
  const int e = (h >> 10) & 0x1F;
  if (e == 0x1F) return INFINITY;
  return std::ldexp(1.0f, (e == 0 ? 1 : e) - 15 - 10 - 1);
}

}  // namespace

std::string_view diff_format_name(DiffFormat f) {
  switch (f) {
    case DiffFormat::kF16: return "f16";
    case DiffFormat::kInt8: return "int8";
    case DiffFormat::kInt4: return "int4";
  }
  return "?";
}

Result<DiffFormat> parse_diff_format(std::string_view text) {
  for (DiffFormat f : {DiffFormat::kF16, DiffFormat::kInt8, DiffFormat::kInt4})
    if (text == diff_format_name(f)) return f;
  return make_error("diff format '" + std::string(text) + "' is not one of f16 (lossless), int8, int4");
}

KvRowCodec::KvRowCodec(DiffFormat format, int n_layer, int kv_dim, int head_dim)
    : format_(format), n_layer_(n_layer), kv_dim_(kv_dim), head_dim_(head_dim), n_head_(kv_dim / head_dim) {
  AGENTKV_CHECK(n_layer > 0 && head_dim > 0 && kv_dim % head_dim == 0 && head_dim % 2 == 0);
  const size_t scales = size_t(n_head_) * sizeof(float);
  switch (format) {
    case DiffFormat::kF16: vector_bytes_ = size_t(kv_dim) * sizeof(kv_t); break;
    case DiffFormat::kInt8: qmax_ = 127, vector_bytes_ = scales + size_t(kv_dim); break;
    case DiffFormat::kInt4: qmax_ = 7, vector_bytes_ = scales + size_t(kv_dim) / 2; break;
  }
}

void KvRowCodec::encode(const kv_t* dense, const kv_t* base, uint8_t* out) const {
  if (diff_format_lossless(format_)) {
    std::memcpy(out, dense, vector_bytes_);
    return;
  }
  uint8_t* q = out + size_t(n_head_) * sizeof(float);
  for (int h = 0; h < n_head_; ++h) {
    const int i0 = h * head_dim_;
    float maxabs = 0;
    for (int i = i0; i < i0 + head_dim_; ++i)
      maxabs = std::max(maxabs, std::fabs(fp16_to_f32(dense[i]) - fp16_to_f32(base[i])));
    const float s = maxabs / float(qmax_);
    std::memcpy(out + size_t(h) * sizeof(float), &s, sizeof s);
    for (int i = i0; i < i0 + head_dim_; ++i) {
      const float d = fp16_to_f32(dense[i]) - fp16_to_f32(base[i]);
      const int v = s > 0 ? std::clamp(int(std::lrint(d / s)), -qmax_, qmax_) : 0;
      if (format_ == DiffFormat::kInt8) {
        q[i] = uint8_t(int8_t(v));
      } else {
        const uint8_t nib = uint8_t(v) & 0x0F;
        q[i / 2] = (i % 2 == 0) ? uint8_t((q[i / 2] & 0xF0) | nib) : uint8_t((q[i / 2] & 0x0F) | (nib << 4));
      }
    }
  }
}

void KvRowCodec::decode(const uint8_t* in, kv_t* inout) const {
  if (diff_format_lossless(format_)) {
    std::memcpy(inout, in, vector_bytes_);
    return;
  }
  const uint8_t* q = in + size_t(n_head_) * sizeof(float);
  for (int h = 0; h < n_head_; ++h) {
    const float s = scale(in, h);
    if (s == 0) continue;  // no difference: the base as it is
    for (int i = h * head_dim_; i < (h + 1) * head_dim_; ++i) {
      int v;
      if (format_ == DiffFormat::kInt8) {
        v = int8_t(q[i]);
      } else {
        const int nib = (i % 2 == 0) ? (q[i / 2] & 0x0F) : (q[i / 2] >> 4);
        v = nib >= 8 ? nib - 16 : nib;
      }
      inout[i] = f32_to_fp16(fp16_to_f32(inout[i]) + float(v) * s);
    }
  }
}

float KvRowCodec::scale(const uint8_t* in, int h) const {
  if (diff_format_lossless(format_)) return 0;
  AGENTKV_CHECK(h >= 0 && h < n_head_);
  float s;
  std::memcpy(&s, in + size_t(h) * sizeof(float), sizeof s);
  return s;
}

float KvRowCodec::error_bound(float scale, kv_t restored) const {
  if (diff_format_lossless(format_)) return 0;
  // The quantization's half step (its f32 arithmetic within 2^-16 of it), then the f16 rounding of
  // the restored value (the f32 sum before it within 2^-10 of that).
  return 0.5f * scale * (1 + 0x1p-16f) + half_ulp(restored) * (1 + 0x1p-10f);
}

}  // namespace agentkv
