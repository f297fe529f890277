// Scalar IEEE half / bfloat16 conversions. Weight scales in every ggml quant block are binary16, so
// these sit on the reference path; SIMD kernels use F16C instead but must agree bit for bit.
#pragma once

#include <cstdint>
#include <cstring>

namespace agentkv {

inline float bits_to_f32(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

inline uint32_t f32_to_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

// Exact: every binary16 value (subnormals, inf, nan payloads) is representable in binary32.
inline float fp16_to_f32(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1Fu;
  uint32_t mant = h & 0x3FFu;
  if (exp == 0x1F) return bits_to_f32(sign | 0x7F800000u | (mant << 13));  // inf / nan
  if (exp != 0) return bits_to_f32(sign | ((exp + 112u) << 23) | (mant << 13));
  if (mant == 0) return bits_to_f32(sign);
  // Subnormal: value = mant * 2^-24, which is exact as a float product.
  const float v = float(mant) * bits_to_f32(0x33800000u);  // 2^-24
  return sign ? -v : v;
}

// Round to nearest even, overflow to inf, nan stays nan (quiet), like F16C's vcvtps2ph with imm 0.
inline uint16_t f32_to_fp16(float f) {
  const uint32_t u = f32_to_bits(f);
  const uint16_t sign = uint16_t((u >> 16) & 0x8000u);
  const uint32_t abs = u & 0x7FFFFFFFu;
  if (abs > 0x7F800000u) return uint16_t(sign | 0x7E00u | ((abs >> 13) & 0x3FFu));  // nan
  if (abs >= 0x477FF000u) return uint16_t(sign | 0x7C00u);  // rounds to >= 65520 -> inf
  if (abs < 0x38800000u) {
    // Result is subnormal (or zero): scale so the half ulp (2^-24) becomes 1.0 and let the FPU's
    // round-to-nearest-even do the work; the value is < 2^10 so the float add is exact enough.
    const float scaled = bits_to_f32(abs) * bits_to_f32(0x4B800000u);  // * 2^24
    // Adding 2^23 forces rounding to an integer in the default rounding mode.
    const float r = (scaled + 8388608.0f) - 8388608.0f;
    return uint16_t(sign | uint16_t(r));
  }
  // Normal: rebias exponent and round the 13 dropped mantissa bits to nearest even.
  uint32_t m = abs - (112u << 23);
  m += 0x0FFFu + ((m >> 13) & 1u);
  return uint16_t(sign | uint16_t(m >> 13));
}

inline float bf16_to_f32(uint16_t h) { return bits_to_f32(uint32_t(h) << 16); }

// Round to nearest even; nan stays nan (quiet bit forced so truncation cannot make it inf).
inline uint16_t f32_to_bf16(float f) {
  const uint32_t u = f32_to_bits(f);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return uint16_t((u >> 16) | 0x40u);
  return uint16_t((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}

// v rounded to the nearest binary16 value (ties to even), returned as f32: what storing a float in a
// ggml f16 tensor and reading it back gives.
inline float round_through_fp16(float v) { return fp16_to_f32(f32_to_fp16(v)); }

// Reads a little-endian binary16 at an arbitrary (possibly unaligned) address.
inline float load_fp16(const void* p) {
  uint16_t h;
  std::memcpy(&h, p, sizeof h);
  return fp16_to_f32(h);
}

}  // namespace agentkv
