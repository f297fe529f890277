// Pieces every x86 kernel family shares (register tiles, packed panels, wide tiles): horizontal sums,
// binary16 fields, nibble and 5-bit unpacking, the legacy block layouts, prefetching, and the K-quant
// scale and code unpacking. Internal linkage (anonymous namespace), as dot_x86_tiles.h explains: each
// ISA file compiles its own copy.
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "ops/kernels.h"

namespace agentkv {
namespace {

inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

inline float half_at(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return _cvtsh_ss(h);
}

// 16 bytes of packed nibbles -> 32 codes: low nibbles are elements 0..15, high nibbles 16..31.
inline __m256i nibbles32(const uint8_t* qs) {
  const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  const __m256i both = _mm256_set_m128i(_mm_srli_epi16(q, 4), q);
  return _mm256_and_si256(both, _mm256_set1_epi8(0x0F));
}

// Q5 high bits: bit j of the little-endian 32-bit qh becomes 0x10 in byte j.
inline __m256i q5_high(const uint8_t* qh_bytes) {
  uint32_t qh;
  std::memcpy(&qh, qh_bytes, 4);
  const __m256i spread = _mm256_shuffle_epi8(
      _mm256_set1_epi32(int(qh)),
      _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202, 0x0101010101010101, 0x0000000000000000));
  const __m256i bit = _mm256_set1_epi64x(int64_t(0x8040201008040201));
  const __m256i set = _mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit);
  return _mm256_and_si256(set, _mm256_set1_epi8(0x10));
}

inline __m256i dot_u8s8(__m256i codes, __m256i y) {
  return _mm256_madd_epi16(_mm256_maddubs_epi16(codes, y), _mm256_set1_epi16(1));
}

// R x T float accumulators of a tile; reduced and stored once at the end.
template <int R, int T>
struct AccTile {
  __m256 v[R][T];
  AccTile() {
    for (int r = 0; r < R; ++r)
      for (int t = 0; t < T; ++t) v[r][t] = _mm256_setzero_ps();
  }
  void store(float* y, int64_t ldy) const {
    for (int t = 0; t < T; ++t)
      for (int r = 0; r < R; ++r) y[t * ldy + r] = hsum(v[r][t]);
  }
};

// ---- Legacy 32-element blocks -------------------------------------------------------------------
// Per weight type: block bytes, where the codes live, and how the integer dot is corrected.
// kLaneOffset: (code offset) / 8, subtracted as isum per i32 lane so the 8 lanes remove offset*isum.
// kMin: the "_1" types add m * s; their codes start after two halves instead of one.
template <int kBits, int kLaneOffset_, bool kMin_>
struct LegacyW {
  static constexpr bool kMin = kMin_, kSigned = kBits == 8;
  static constexpr int kLaneOffset = kLaneOffset_, kCodeBits = kBits;
  static constexpr int kHead = kMin ? 4 : 2;  // bytes of half fields
  static constexpr int kBytes = kHead + (kBits == 5 ? 4 : 0) + (kBits == 8 ? 32 : 16);
  static __m256i codes(const uint8_t* b) {
    if constexpr (kBits == 8) return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 2));
    if constexpr (kBits == 4) return nibbles32(b + kHead);
    return _mm256_or_si256(nibbles32(b + kHead + 4), q5_high(b + kHead));
  }
};
using Q4_0W = LegacyW<4, 1, false>;
using Q5_0W = LegacyW<5, 2, false>;
using Q8_0W = LegacyW<8, 0, false>;
using Q4_1W = LegacyW<4, 0, true>;
using Q5_1W = LegacyW<5, 0, true>;

// Decode streams each weight once, mostly from DRAM (the LM head alone is ~30 MB): prefetching the
// rows this many ahead lifts a single thread's Q8_0 576x49152 stream from ~3.5 to ~6 GB/s here.
constexpr int64_t kPrefetchRows = 16;

inline void prefetch_span(const uint8_t* p, int bytes) {
  for (int o = 0; o < bytes; o += 64) _mm_prefetch(reinterpret_cast<const char*>(p + o), _MM_HINT_T0);
}

// The 12 packed bytes of Q4_K/Q5_K scales -> 8 six-bit scales and 8 mins (low 8 bytes of each),
// the get_scale_min_k4 rules applied four bytes at a time.
inline void k_scales_mins(const uint8_t* p, __m128i* sc, __m128i* m) {
  uint32_t a, b, c;
  std::memcpy(&a, p, 4);
  std::memcpy(&b, p + 4, 4);
  std::memcpy(&c, p + 8, 4);
  const uint32_t sc_lo = a & 0x3F3F3F3Fu, m_lo = b & 0x3F3F3F3Fu;
  const uint32_t sc_hi = (c & 0x0F0F0F0Fu) | ((a >> 2) & 0x30303030u);
  const uint32_t m_hi = ((c >> 4) & 0x0F0F0F0Fu) | ((b >> 2) & 0x30303030u);
  *sc = _mm_cvtsi64_si128(int64_t(uint64_t(sc_lo) | (uint64_t(sc_hi) << 32)));
  *m = _mm_cvtsi64_si128(int64_t(uint64_t(m_lo) | (uint64_t(m_hi) << 32)));
}

// Codes of 32-element vector j (0..7) of a Q4_K / Q5_K super-block, unsigned (0..15 or 0..31).
template <bool kFive>
inline __m256i q45k_codes(const uint8_t* blk, int j) {
  __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + (kFive ? 48 : 16) + 32 * (j / 2)));
  if (j & 1) q = _mm256_srli_epi16(q, 4);
  q = _mm256_and_si256(q, _mm256_set1_epi8(0x0F));
  if constexpr (kFive) {
    const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 16));
    const __m256i bit = _mm256_and_si256(_mm256_srli_epi16(qh, j), _mm256_set1_epi8(1));
    q = _mm256_or_si256(q, _mm256_slli_epi16(bit, 4));
  }
  return q;
}

// Codes of vector i (0..3) of half n (0..1) of a Q6_K super-block, unsigned (0..63): low (i < 2) or
// high nibbles of ql[32*(i&1)...], high bits 2i..2i+1 of qh.
inline __m256i q6k_codes(const uint8_t* blk, int n, int i) {
  __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 64 * n + 32 * (i & 1)));
  if (i >= 2) q = _mm256_srli_epi16(q, 4);
  q = _mm256_and_si256(q, _mm256_set1_epi8(0x0F));
  const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 128 + 32 * n));
  const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(qh, 2 * i), _mm256_set1_epi8(3));
  return _mm256_or_si256(q, _mm256_slli_epi16(hi, 4));
}

}  // namespace
}  // namespace agentkv
