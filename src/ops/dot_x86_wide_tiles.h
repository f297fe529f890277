// AVX-512 wide decode tiles (part of dot_x86_tiles.h, internal linkage; empty outside an AVX-512
// build): two tokens per 512-bit vector, each half bit-identical to the 256-bit register tiles.
#pragma once

#include <immintrin.h>

#include <cmath>
#include <cstring>

#include "ops/dot_x86_common.h"

namespace agentkv {
namespace {

// ---- Wide decode tiles (AVX-512 build only) ----------------------------------------------------
// Two tokens per 512-bit vector: lanes 0-7 hold token t's eight partial sums, lanes 8-15 token t+1's.
// Each half goes through exactly the integer and float operations the 256-bit tiles (dot_x86_tiles.h) apply to one
// token (the same i32 lanes, the same scale products, the same FMA chain over blocks, the same final
// horizontal sum), so a (row, token) result is bit-identical to the 256-bit tile's whatever the batch:
// batched decode shares each unpacked weight block across up to 8 tokens at half the instructions.
#if defined(__AVX512BW__) && defined(__AVX512DQ__)
#define AGENTKV_WIDE_TILES 1

inline __m512i pair_si(__m256i lo, __m256i hi) { return _mm512_inserti64x4(_mm512_zextsi256_si512(lo), hi, 1); }
inline __m512 pair_ps(__m256 lo, __m256 hi) { return _mm512_insertf32x8(_mm512_zextps256_ps512(lo), hi, 1); }
inline __m512i both_si(__m256i v) { return _mm512_broadcast_i64x4(v); }
// Each i32 lane: the sum of its 4 (unsigned code x signed activation) products. VNNI does it in one
// instruction; without it vpmaddubsw + vpmaddwd give the same integer (no pair reaches the i16 limit:
// codes <= 31, or |Q8_0 code| <= 128 against |activation| <= 127).
inline __m512i dot_u8s8_w(__m512i codes, __m512i y) {
#if defined(__AVX512VNNI__)
  return _mm512_dpbusd_epi32(_mm512_setzero_si512(), codes, y);
#else
  return _mm512_madd_epi16(_mm512_maddubs_epi16(codes, y), _mm512_set1_epi16(1));
#endif
}
inline __m512i load_pair(const int8_t* p0, const int8_t* p1) {
  return pair_si(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p0)),
                 _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p1)));
}

// R rows x P token pairs of accumulators; each half is reduced as AccTile reduces its vector.
template <int R, int P>
struct WideAcc {
  __m512 v[R][P];
  WideAcc() {
    for (int r = 0; r < R; ++r)
      for (int p = 0; p < P; ++p) v[r][p] = _mm512_setzero_ps();
  }
  void store(float* y, int64_t ldy) const {
    for (int p = 0; p < P; ++p)
      for (int r = 0; r < R; ++r) {
        y[(2 * p) * ldy + r] = hsum(_mm512_castps512_ps256(v[r][p]));
        y[(2 * p + 1) * ldy + r] = hsum(_mm512_extractf32x8_ps(v[r][p], 1));
      }
  }
};

template <class W, int R, int P>
void wide_legacy(const uint8_t* w, size_t row_bytes, const ActBuffer& a, int64_t t0, float* y, int64_t ldy) {
  static_assert(P <= 4, "msum holds 8 tokens");
  constexpr int T = 2 * P;
  const int64_t nb = a.cols() / 32;
  WideAcc<R, P> acc;
  // The "_1" types' m * s terms, one lane per token: the same f32 multiply and add per (row, token)
  // as the 256-bit tile's scalar msum (built without FP contraction), 8 tokens at a time.
  __m256 msum[R];
  for (int r = 0; r < R; ++r) msum[r] = _mm256_setzero_ps();
  const int8_t* yq[T];
  const float* yd[T];
  const uint8_t* yaux[T];
  for (int t = 0; t < T; ++t) {
    yq[t] = a.qs(t0 + t);
    yd[t] = a.d(t0 + t);
    yaux[t] = reinterpret_cast<const uint8_t*>(a.row(t0 + t)) + a.aux_off();
  }
  for (int64_t k = 0; k < nb; ++k) {
    if constexpr (W::kMin) {
      alignas(32) float sv[8] = {};
      for (int t = 0; t < T; ++t) std::memcpy(&sv[t], yaux[t] + 4 * k, 4);
      const __m256 s8 = _mm256_load_ps(sv);
      for (int r = 0; r < R; ++r) {
        const uint8_t* blk = w + size_t(r) * row_bytes + size_t(k) * W::kBytes;
        msum[r] = _mm256_add_ps(msum[r], _mm256_mul_ps(_mm256_set1_ps(half_at(blk + 2)), s8));
      }
    }
    __m512i codes[R];
    __m512 dx[R];
#if defined(__AVX512VNNI__)
    // VNNI: vpdpbusd adds into an accumulator, so each lane starts at minus its offset term and one
    // instruction per (row, token pair) yields the 256-bit tile's exact integer. Signed Q8_0 codes
    // become unsigned as x + 128 (x ^ 0x80), whose extra 128 * sum(y) joins the offset term.
    constexpr int kOffset = W::kSigned ? 128 : 8 * W::kLaneOffset;  // per code, against sum(y)
    for (int r = 0; r < R; ++r) {
      const uint8_t* blk = w + size_t(r) * row_bytes + size_t(k) * W::kBytes;
      _mm_prefetch(reinterpret_cast<const char*>(blk + kPrefetchRows * row_bytes), _MM_HINT_T0);
      __m256i c = W::codes(blk);
      if constexpr (W::kSigned) c = _mm256_xor_si256(c, _mm256_set1_epi8(char(0x80)));
      codes[r] = both_si(c);
      dx[r] = _mm512_set1_ps(half_at(blk));
    }
    for (int p = 0; p < P; ++p) {
      const int t = 2 * p;
      const __m512i yv = load_pair(yq[t] + 32 * k, yq[t + 1] + 32 * k);
      const __m512 dy = pair_ps(_mm256_set1_ps(yd[t][k]), _mm256_set1_ps(yd[t + 1][k]));
      __m512i start = _mm512_setzero_si512();
      if constexpr (kOffset != 0)
        start = _mm512_sub_epi32(start, _mm512_dpbusd_epi32(start, _mm512_set1_epi8(char(kOffset)), yv));
      for (int r = 0; r < R; ++r) {
        const __m512i prod = _mm512_dpbusd_epi32(start, codes[r], yv);
#else
    __mmask64 neg[R];  // signed codes: where the weight is negative, the activation is negated
    for (int r = 0; r < R; ++r) {
      const uint8_t* blk = w + size_t(r) * row_bytes + size_t(k) * W::kBytes;
      // Few tokens per weight (a decode batch): the rows ahead stream from memory as in the 1-token tile.
      _mm_prefetch(reinterpret_cast<const char*>(blk + kPrefetchRows * row_bytes), _MM_HINT_T0);
      __m256i c = W::codes(blk);
      if constexpr (W::kSigned) {
        neg[r] = _mm512_movepi8_mask(both_si(c));
        c = _mm256_sign_epi8(c, c);
      }
      codes[r] = both_si(c);
      dx[r] = _mm512_set1_ps(half_at(blk));
    }
    for (int p = 0; p < P; ++p) {
      const int t = 2 * p;
      const __m512i yv = load_pair(yq[t] + 32 * k, yq[t + 1] + 32 * k);
      const __m512 dy = pair_ps(_mm256_set1_ps(yd[t][k]), _mm256_set1_ps(yd[t + 1][k]));
      __m512i lane_off = _mm512_setzero_si512();
      if constexpr (W::kLaneOffset != 0)
        lane_off = _mm512_mullo_epi32(dot_u8s8_w(_mm512_set1_epi8(1), yv), _mm512_set1_epi32(8 * W::kLaneOffset));
      for (int r = 0; r < R; ++r) {
        __m512i prod;
        if constexpr (W::kSigned) {
          // _mm256_sign_epi8(y, x) as a mask: y negated where x < 0 (where x == 0 the code is 0 anyway).
          prod = dot_u8s8_w(codes[r], _mm512_mask_sub_epi8(yv, neg[r], _mm512_setzero_si512(), yv));
        } else {
          prod = dot_u8s8_w(codes[r], yv);
        }
        if constexpr (W::kLaneOffset != 0) prod = _mm512_sub_epi32(prod, lane_off);
#endif
        acc.v[r][p] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(prod), _mm512_mul_ps(dx[r], dy), acc.v[r][p]);
      }
    }
  }
  acc.store(y, ldy);
  if constexpr (W::kMin)
    for (int r = 0; r < R; ++r) {
      alignas(32) float m[8];
      _mm256_store_ps(m, msum[r]);
      for (int t = 0; t < T; ++t) y[t * ldy + r] += m[t];
    }
}

template <bool kFive, int R, int P>
void wide_q45k(const uint8_t* w, size_t row_bytes, const ActBuffer& a, int64_t t0, float* y, int64_t ldy) {
  constexpr int kBytes = kFive ? 176 : 144;
  const int64_t nb = a.cols() / 256;
  WideAcc<R, P> acc;
  for (int64_t k = 0; k < nb; ++k) {
    const uint8_t* blk[R];
    __m256i sc16[R];
    __m512i mins16[R];
    for (int r = 0; r < R; ++r) {
      blk[r] = w + size_t(r) * row_bytes + size_t(k) * kBytes;
      prefetch_span(blk[r] + kPrefetchRows * row_bytes, kBytes);
      __m128i sc8, m8;
      k_scales_mins(blk[r] + 4, &sc8, &m8);
      sc16[r] = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(sc8));
      mins16[r] = both_si(_mm256_cvtepu8_epi16(_mm_unpacklo_epi8(m8, m8)));
    }
    __m512i isum[R][P];
    for (int r = 0; r < R; ++r)
      for (int p = 0; p < P; ++p) isum[r][p] = _mm512_setzero_si512();
    for (int j = 0; j < 8; ++j) {
      for (int r = 0; r < R; ++r) {
        const __m256i q = q45k_codes<kFive>(blk[r], j);
        const __m512i q2 = both_si(q);
        const __m512i scale =
            both_si(_mm256_shuffle_epi8(sc16[r], _mm256_set1_epi16(int16_t(0x0100 * (2 * j + 1) + 2 * j))));
        for (int p = 0; p < P; ++p) {
          const __m512i yv = load_pair(a.qs(t0 + 2 * p) + 256 * k + 32 * j, a.qs(t0 + 2 * p + 1) + 256 * k + 32 * j);
          isum[r][p] = _mm512_add_epi32(isum[r][p], _mm512_madd_epi16(_mm512_maddubs_epi16(q2, yv), scale));
        }
      }
    }
    for (int p = 0; p < P; ++p) {
      const float dy0 = a.d(t0 + 2 * p)[k], dy1 = a.d(t0 + 2 * p + 1)[k];
      const __m512i bs = pair_si(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.bsums(t0 + 2 * p) + 16 * k)),
                                 _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.bsums(t0 + 2 * p + 1) + 16 * k)));
      for (int r = 0; r < R; ++r) {
        const float hd = half_at(blk[r]), hm = half_at(blk[r] + 2);
        const __m512 d = pair_ps(_mm256_set1_ps(hd * dy0), _mm256_set1_ps(hd * dy1));
        const __m512 dmin = pair_ps(_mm256_set1_ps(hm * dy0), _mm256_set1_ps(hm * dy1));
        acc.v[r][p] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[r][p]), d, acc.v[r][p]);
        const __m512i mm = _mm512_madd_epi16(mins16[r], bs);
        acc.v[r][p] = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(mm), dmin, acc.v[r][p]);
      }
    }
  }
  acc.store(y, ldy);
}

template <int R, int P>
void wide_q6k(const uint8_t* w, size_t row_bytes, const ActBuffer& a, int64_t t0, float* y, int64_t ldy) {
  const int64_t nb = a.cols() / 256;
  WideAcc<R, P> acc;
  for (int64_t k = 0; k < nb; ++k) {
    const uint8_t* blk[R];
    __m128i sc8[R];
    for (int r = 0; r < R; ++r) {
      blk[r] = w + size_t(r) * row_bytes + size_t(k) * 210;
      prefetch_span(blk[r] + kPrefetchRows * row_bytes, 210);
      sc8[r] = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk[r] + 192));
    }
    __m512i isum[R][P];
    for (int r = 0; r < R; ++r)
      for (int p = 0; p < P; ++p) isum[r][p] = _mm512_setzero_si512();
    for (int n = 0; n < 2; ++n) {
      for (int i = 0; i < 4; ++i) {
        const int s = 8 * n + 2 * i;
        const __m128i pick = _mm_set_epi64x(int64_t(0x0101010101010101ULL * uint64_t(s + 1)),
                                            int64_t(0x0101010101010101ULL * uint64_t(s)));
        for (int r = 0; r < R; ++r) {
          const __m512i q2 = both_si(q6k_codes(blk[r], n, i));
          const __m512i scale = both_si(_mm256_cvtepi8_epi16(_mm_shuffle_epi8(sc8[r], pick)));
          for (int p = 0; p < P; ++p) {
            const int64_t off = 256 * k + 128 * n + 32 * i;
            const __m512i yv = load_pair(a.qs(t0 + 2 * p) + off, a.qs(t0 + 2 * p + 1) + off);
            isum[r][p] = _mm512_add_epi32(isum[r][p], _mm512_madd_epi16(_mm512_maddubs_epi16(q2, yv), scale));
          }
        }
      }
    }
    for (int p = 0; p < P; ++p) {
      const float dy0 = a.d(t0 + 2 * p)[k], dy1 = a.d(t0 + 2 * p + 1)[k];
      const __m512i bs = pair_si(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.bsums(t0 + 2 * p) + 16 * k)),
                                 _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.bsums(t0 + 2 * p + 1) + 16 * k)));
      for (int r = 0; r < R; ++r) {
        const __m512i corr = _mm512_madd_epi16(both_si(_mm256_cvtepi8_epi16(sc8[r])), bs);
        const __m512i v = _mm512_sub_epi32(isum[r][p], _mm512_slli_epi32(corr, 5));
        const float hd = half_at(blk[r] + 208);
        acc.v[r][p] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(v), pair_ps(_mm256_set1_ps(hd * dy0), _mm256_set1_ps(hd * dy1)),
                                      acc.v[r][p]);
      }
    }
  }
  acc.store(y, ldy);
}

// Float weights (F32, F16, BF16: W as in dot_x86_tiles.h): each row's eight weights broadcast to both
// halves, two tokens' activations side by side. Per half the same FMA chain over the row as
// tile_float, the same horizontal sum and the same fused tail, so the result is bit-identical to
// it; twice the multiply-adds per instruction (the transfer maps' projection runs here). The
// activations come packed (pack_float_pairs): eight columns of token 2p then of 2p+1 in one aligned
// 512-bit row, chunk by chunk, so a pair is one load rather than two and a lane insert.
using PackedFloatTileFn = void (*)(const uint8_t*, size_t, const ActBuffer&, int64_t, const float*, float*, int64_t);

// Tokens [t0, t0 + 2 * pairs) of `a`, the first cols / 8 * 8 columns: chunk i of pair p at
// xp + (i * pairs + p) * 16 (xp 64-byte aligned).
inline void pack_float_pairs(const ActBuffer& a, int64_t t0, int pairs, float* xp) {
  const int64_t n8 = a.cols() / 8 * 8;
  for (int p = 0; p < pairs; ++p) {
    const float* x0 = a.f32(t0 + 2 * p);
    const float* x1 = a.f32(t0 + 2 * p + 1);
    for (int64_t i = 0; i < n8; i += 8) {
      float* dst = xp + ((i / 8) * pairs + p) * 16;
      _mm256_store_ps(dst, _mm256_loadu_ps(x0 + i));
      _mm256_store_ps(dst + 8, _mm256_loadu_ps(x1 + i));
    }
  }
}

template <class W, int R, int P>
void wide_float(const uint8_t* w, size_t row_bytes, const ActBuffer& a, int64_t t0, const float* xp, float* y,
                int64_t ldy) {
  const int64_t n = a.cols(), n8 = n / 8 * 8;
  WideAcc<R, P> acc;
  for (int64_t i = 0; i < n8; i += 8) {
    __m512 wv[R];
    for (int r = 0; r < R; ++r) wv[r] = _mm512_broadcast_f32x8(W::load8(w + size_t(r) * row_bytes, i));
    const float* xi = xp + (i / 8) * P * 16;
    for (int p = 0; p < P; ++p) {
      const __m512 xv = _mm512_load_ps(xi + p * 16);
      for (int r = 0; r < R; ++r) acc.v[r][p] = _mm512_fmadd_ps(wv[r], xv, acc.v[r][p]);
    }
  }
  if constexpr (R == 4) {
    // A pair's four rows reduced together, each (row, token) by hsum's own adds: its 8 lanes as
    // (a_i + a_i+4), then (b_0 + b_2) + (b_1 + b_3). Lanes of the result: token 2p's rows 0-3, then 2p+1's.
    const __m512i order = _mm512_setr_epi32(0, 8, 2, 10, 4, 12, 6, 14, 0, 0, 0, 0, 0, 0, 0, 0);
    for (int p = 0; p < P; ++p) {
      const __m512 b01 = _mm512_add_ps(_mm512_shuffle_f32x4(acc.v[0][p], acc.v[1][p], _MM_SHUFFLE(2, 0, 2, 0)),
                                       _mm512_shuffle_f32x4(acc.v[0][p], acc.v[1][p], _MM_SHUFFLE(3, 1, 3, 1)));
      const __m512 b23 = _mm512_add_ps(_mm512_shuffle_f32x4(acc.v[2][p], acc.v[3][p], _MM_SHUFFLE(2, 0, 2, 0)),
                                       _mm512_shuffle_f32x4(acc.v[2][p], acc.v[3][p], _MM_SHUFFLE(3, 1, 3, 1)));
      // 128-bit lane k of b01: rows 0, 1 / tokens A, B as (A0, B0, A1, B1); of b23 the same for rows 2, 3.
      const __m512 c = _mm512_add_ps(_mm512_shuffle_ps(b01, b23, _MM_SHUFFLE(1, 0, 1, 0)),
                                     _mm512_shuffle_ps(b01, b23, _MM_SHUFFLE(3, 2, 3, 2)));
      const __m512 d = _mm512_add_ps(c, _mm512_movehdup_ps(c));
      __m256 sum = _mm512_castps512_ps256(_mm512_permutexvar_ps(order, d));
      // The tail, one column at a time, as fused multiply-adds as tile_float does.
      for (int64_t j = n8; j < n; ++j) {
        const float xa = a.f32(t0 + 2 * p)[j], xb = a.f32(t0 + 2 * p + 1)[j];
        const float w0 = W::load1(w, j), w1 = W::load1(w + row_bytes, j), w2 = W::load1(w + 2 * row_bytes, j),
                    w3 = W::load1(w + 3 * row_bytes, j);
        sum = _mm256_fmadd_ps(_mm256_setr_ps(w0, w1, w2, w3, w0, w1, w2, w3),
                              _mm256_setr_ps(xa, xa, xa, xa, xb, xb, xb, xb), sum);
      }
      _mm_storeu_ps(y + (2 * p) * ldy, _mm256_castps256_ps128(sum));
      _mm_storeu_ps(y + (2 * p + 1) * ldy, _mm256_extractf128_ps(sum, 1));
    }
  } else {
    for (int p = 0; p < P; ++p)
      for (int h = 0; h < 2; ++h) {
        const int64_t t = t0 + 2 * p + h;
        for (int r = 0; r < R; ++r) {
          float s = hsum(h == 0 ? _mm512_castps512_ps256(acc.v[r][p]) : _mm512_extractf32x8_ps(acc.v[r][p], 1));
          for (int64_t j = n8; j < n; ++j) s = std::fma(W::load1(w + size_t(r) * row_bytes, j), a.f32(t)[j], s);
          y[(2 * p + h) * ldy + r] = s;
        }
      }
  }
}
#endif  // AVX-512

}  // namespace
}  // namespace agentkv
