// Packed-panel GEMM kernels for prefill (part of dot_x86_tiles.h, internal linkage): 8 weight rows
// unpacked once per call into a scratch panel that the chunk's tokens then stream past, for the legacy
// 32-element types and the K-quants.
#pragma once

#include <immintrin.h>

#include <array>
#include <cstring>
#include <utility>
#include <vector>

#include "ops/dot_x86_common.h"

namespace agentkv {
namespace {

// ---- Packed legacy GEMM (prefill) --------------------------------------------------------------
// For many tokens, 8 weight rows are unpacked once into a scratch panel laid out so that one vector
// holds 4 consecutive codes of each of the 8 rows: g-th vector of block k = [row0 codes 4g..4g+3,
// row1 codes 4g..4g+3, ..., row7 ...]. Dotting it against a broadcast of the token's 4 activation
// bytes puts row i's partial dot in lane i, so the 8 rows' results fill one float vector: no
// horizontal sums, one scale multiply per (8 rows, token, block), and the weight unpack is paid once
// per panel instead of once per 2 tokens. Integer sums are exact (i16 partial sums stay < 2^15:
// 4-bit codes <= 15 over 8 groups, 5-bit codes <= 31 over 4 groups; Q8_0 widens every group).
template <class W>
struct PackedPanel {
  static constexpr int kGroups = 8;                         // 4-byte code groups per 32-block
  static constexpr size_t kBlockBytes = 256 + 32 + (W::kMin ? 32 : 0);  // codes, d[8], m[8]
};

// 8 vectors of 8 i32 each (row r = in[r]) -> out[j] = lane j of every row.
inline void transpose8x8_epi32(const __m256i in[8], __m256i out[8]) {
  __m256i t[8], u[8];
  for (int i = 0; i < 4; ++i) {
    t[2 * i] = _mm256_unpacklo_epi32(in[2 * i], in[2 * i + 1]);
    t[2 * i + 1] = _mm256_unpackhi_epi32(in[2 * i], in[2 * i + 1]);
  }
  for (int h = 0; h < 2; ++h) {  // rows 0..3 (h = 0) and 4..7 (h = 1)
    const __m256i* tt = t + 4 * h;
    u[4 * h + 0] = _mm256_unpacklo_epi64(tt[0], tt[2]);
    u[4 * h + 1] = _mm256_unpackhi_epi64(tt[0], tt[2]);
    u[4 * h + 2] = _mm256_unpacklo_epi64(tt[1], tt[3]);
    u[4 * h + 3] = _mm256_unpackhi_epi64(tt[1], tt[3]);
  }
  for (int j = 0; j < 4; ++j) {
    out[j] = _mm256_permute2x128_si256(u[j], u[4 + j], 0x20);
    out[j + 4] = _mm256_permute2x128_si256(u[j], u[4 + j], 0x31);
  }
}

template <class W>
void pack_legacy_panel(const uint8_t* w, size_t row_bytes, int64_t nb, uint8_t* panel) {
  for (int64_t k = 0; k < nb; ++k) {
    uint8_t* out = panel + size_t(k) * PackedPanel<W>::kBlockBytes;
    __m256i rows[8], cols[8];
    float d[8], m[8];
    for (int r = 0; r < 8; ++r) {
      const uint8_t* blk = w + size_t(r) * row_bytes + size_t(k) * W::kBytes;
      rows[r] = W::codes(blk);
      d[r] = half_at(blk);
      if constexpr (W::kMin) m[r] = half_at(blk + 2);
    }
    transpose8x8_epi32(rows, cols);
    for (int g = 0; g < 8; ++g) _mm256_store_si256(reinterpret_cast<__m256i*>(out + 32 * g), cols[g]);
    std::memcpy(out + 256, d, 32);
    if constexpr (W::kMin) std::memcpy(out + 288, m, 32);
  }
}

inline __m256i bcast4(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm256_set1_epi32(v);
}

// T tokens (t0..t0+T) against one packed 8-row panel; y[t * ldy + 0..8).
template <class W, int T>
void panel_tokens(const uint8_t* panel, int64_t nb, const ActBuffer& a, int64_t t0, float* y, int64_t ldy) {
  const __m256i ones = _mm256_set1_epi16(1);
  __m256 acc[T];
  const int8_t* yq[T];
  const float* yd[T];
  const uint8_t* yaux[T];
  for (int t = 0; t < T; ++t) {
    acc[t] = _mm256_setzero_ps();
    yq[t] = a.qs(t0 + t);
    yd[t] = a.d(t0 + t);
    yaux[t] = a.row(t0 + t) + a.aux_off();
  }
  for (int64_t k = 0; k < nb; ++k) {
    const uint8_t* pb = panel + size_t(k) * PackedPanel<W>::kBlockBytes;
    __m256i isum[T];
    if constexpr (W::kSigned) {
      for (int t = 0; t < T; ++t) isum[t] = _mm256_setzero_si256();
      for (int g = 0; g < 8; ++g) {
        const __m256i wv = _mm256_load_si256(reinterpret_cast<const __m256i*>(pb + 32 * g));
        const __m256i wa = _mm256_sign_epi8(wv, wv);
        for (int t = 0; t < T; ++t) {
          const __m256i yb = _mm256_sign_epi8(bcast4(yq[t] + 32 * k + 4 * g), wv);
          isum[t] = _mm256_add_epi32(isum[t], _mm256_madd_epi16(_mm256_maddubs_epi16(wa, yb), ones));
        }
      }
    } else {
      constexpr int kSpan = W::kCodeBits == 5 ? 4 : 8;  // groups per i16 partial sum (5-bit: 4)
      for (int t = 0; t < T; ++t) isum[t] = _mm256_setzero_si256();
      for (int g0 = 0; g0 < 8; g0 += kSpan) {
        __m256i s16[T];
        for (int t = 0; t < T; ++t) s16[t] = _mm256_setzero_si256();
        for (int g = g0; g < g0 + kSpan; ++g) {
          const __m256i wv = _mm256_load_si256(reinterpret_cast<const __m256i*>(pb + 32 * g));
          for (int t = 0; t < T; ++t)
            s16[t] = _mm256_add_epi16(s16[t], _mm256_maddubs_epi16(wv, bcast4(yq[t] + 32 * k + 4 * g)));
        }
        for (int t = 0; t < T; ++t) isum[t] = _mm256_add_epi32(isum[t], _mm256_madd_epi16(s16[t], ones));
      }
    }
    const __m256 dx = _mm256_load_ps(reinterpret_cast<const float*>(pb + 256));
    for (int t = 0; t < T; ++t) {
      __m256i p = isum[t];
      int32_t aux;
      std::memcpy(&aux, yaux[t] + 4 * k, 4);
      if constexpr (W::kLaneOffset != 0) p = _mm256_sub_epi32(p, _mm256_set1_epi32(aux * 8 * W::kLaneOffset));
      acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_mul_ps(dx, _mm256_set1_ps(yd[t][k])), acc[t]);
      if constexpr (W::kMin) {
        float s;
        std::memcpy(&s, &aux, 4);
        acc[t] = _mm256_fmadd_ps(_mm256_load_ps(reinterpret_cast<const float*>(pb + 288)), _mm256_set1_ps(s),
                                 acc[t]);
      }
    }
  }
  for (int t = 0; t < T; ++t) _mm256_storeu_ps(y + t * ldy, acc[t]);
}

// Scratch panel for one 8-row group, reused per thread (grows to the widest matrix once).
inline uint8_t* panel_scratch(size_t bytes) {
  thread_local std::vector<uint8_t> buf;
  if (buf.size() < bytes + 32) buf.resize(bytes + 32);
  const auto addr = reinterpret_cast<uintptr_t>(buf.data());
  return buf.data() + ((32 - addr % 32) % 32);
}

// Rows in groups of 8 through packed panels, all tokens of the chunk per panel; returns the number
// of rows done (a multiple of 8) so the caller covers the rest with register tiles. Ops supplies the
// panel layout: kBlockBytes per weight block of kBlockElems, pack(), and tokens<T>.
template <class Ops, int T>
int64_t run_packed(const uint8_t* w, size_t row_bytes, int64_t nrows, const ActBuffer& a, int64_t t0, int64_t t1,
                   float* y, int64_t ldy) {
  static constexpr std::array<void (*)(const uint8_t*, int64_t, const ActBuffer&, int64_t, float*, int64_t), T>
      kTail = [] {
        std::array<void (*)(const uint8_t*, int64_t, const ActBuffer&, int64_t, float*, int64_t), T> f{};
        [&]<size_t... I>(std::index_sequence<I...>) { ((f[I] = Ops::template tokens<int(I) + 1>), ...); }
        (std::make_index_sequence<T>());
        return f;
      }();
  const int64_t nb = a.cols() / Ops::kBlockElems;
  uint8_t* panel = panel_scratch(size_t(nb) * Ops::kBlockBytes);
  const int64_t done = nrows / 8 * 8;
  for (int64_t r = 0; r < done; r += 8) {
    Ops::pack(w + size_t(r) * row_bytes, row_bytes, nb, panel);
    int64_t t = t0;
    for (; t + T <= t1; t += T) Ops::template tokens<T>(panel, nb, a, t, y + (t - t0) * ldy + r, ldy);
    if (t < t1) kTail[size_t(t1 - t - 1)](panel, nb, a, t, y + (t - t0) * ldy + r, ldy);
  }
  return done;
}

template <class W>
struct LegacyPanelOps {
  static constexpr size_t kBlockBytes = PackedPanel<W>::kBlockBytes;
  static constexpr int64_t kBlockElems = 32;
  static void pack(const uint8_t* w, size_t row_bytes, int64_t nb, uint8_t* panel) {
    pack_legacy_panel<W>(w, row_bytes, nb, panel);
  }
  template <int T>
  static constexpr auto tokens = panel_tokens<W, T>;
};

// ---- Packed K-quant GEMM (prefill) -------------------------------------------------------------
// The packed-panel scheme of the legacy types applied to 256-element super-blocks: 8 rows' codes are
// unpacked once (4 consecutive codes of each row per i32 lane, 8 vectors per 32 elements), and
// every sub-block's i16 partial sums are widened by vpmaddwd against a vector holding each row's
// sub-block scale, so row i's scaled integer dot builds up in lane i. i16 partial sums stay exact:
// Q4_K sums 8 groups (<= 8 * 2 * 15 * 128), Q5_K 4 groups (31), Q6_K 2 groups (63).
// Per super-block panel: codes[2048], scale vectors (i16 [s, s] per lane), correction vectors
// (i16 pairs per lane, madd'ed against broadcast pairs of activation sums), then d[8] (and dmin[8]).
template <int kKind>  // 4: Q4_K, 5: Q5_K, 6: Q6_K
struct KPanel {
  static constexpr bool kSix = kKind == 6;
  static constexpr int kScales = kSix ? 16 : 8;       // sub-blocks per super-block
  static constexpr int kScaleGroups = kSix ? 4 : 8;   // 4-byte code groups per sub-block
  static constexpr int kSpan = kKind == 4 ? 8 : kKind == 5 ? 4 : 2;  // groups per i16 partial sum
  static constexpr int kCorr = kSix ? 8 : 4;          // correction pair vectors
  static constexpr size_t kScaleOff = 2048, kCorrOff = kScaleOff + 32 * kScales,
                          kDOff = kCorrOff + 32 * kCorr, kBlockBytes = kDOff + (kSix ? 32 : 64);
  static constexpr int kSrcBytes = kKind == 4 ? 144 : kKind == 5 ? 176 : 210;
};

// One row's super-block as 8 vectors of 32 codes (elements 32v..32v+31) plus its i16 scales
// (kScales of them) and, for Q4_K/Q5_K, its 8 mins.
template <int kKind>
inline void k_unpack_row(const uint8_t* blk, __m256i v[8], int16_t* sc, int16_t* mn, float* d, float* dmin) {
  if constexpr (kKind == 6) {
    for (int n = 0; n < 2; ++n)
      for (int i = 0; i < 4; ++i) v[4 * n + i] = q6k_codes(blk, n, i);
    for (int s = 0; s < 16; ++s) sc[s] = int8_t(blk[192 + s]);
    *d = half_at(blk + 208);
  } else {
    for (int j = 0; j < 8; ++j) v[j] = q45k_codes<kKind == 5>(blk, j);
    __m128i sc8, m8;
    k_scales_mins(blk + 4, &sc8, &m8);
    uint8_t s8[16], mm8[16];
    _mm_storeu_si128(reinterpret_cast<__m128i*>(s8), sc8);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(mm8), m8);
    for (int j = 0; j < 8; ++j) {
      sc[j] = s8[j];
      mn[j] = mm8[j];
    }
    *d = half_at(blk);
    *dmin = half_at(blk + 2);
  }
}

template <int kKind>
void pack_k_panel(const uint8_t* w, size_t row_bytes, int64_t nb, uint8_t* panel) {
  using P = KPanel<kKind>;
  for (int64_t k = 0; k < nb; ++k) {
    uint8_t* out = panel + size_t(k) * P::kBlockBytes;
    __m256i v[8][8];  // [row][32-element vector]
    int16_t sc[8][16], mn[8][8];
    float d[8], dmin[8];
    for (int r = 0; r < 8; ++r)
      k_unpack_row<kKind>(w + size_t(r) * row_bytes + size_t(k) * P::kSrcBytes, v[r], sc[r], mn[r], &d[r], &dmin[r]);
    for (int j = 0; j < 8; ++j) {
      __m256i rows[8], cols[8];
      for (int r = 0; r < 8; ++r) rows[r] = v[r][j];
      transpose8x8_epi32(rows, cols);
      for (int g = 0; g < 8; ++g) _mm256_store_si256(reinterpret_cast<__m256i*>(out + 256 * j + 32 * g), cols[g]);
    }
    auto* scv = reinterpret_cast<int16_t*>(out + P::kScaleOff);
    for (int s = 0; s < P::kScales; ++s)
      for (int r = 0; r < 8; ++r) scv[16 * s + 2 * r] = scv[16 * s + 2 * r + 1] = sc[r][s];
    auto* cv = reinterpret_cast<int16_t*>(out + P::kCorrOff);
    for (int p = 0; p < P::kCorr; ++p)
      for (int r = 0; r < 8; ++r) {
        if constexpr (P::kSix) {  // -32 * scale: the unsigned-code offset, against bsums (16s)
          cv[16 * p + 2 * r] = int16_t(-32 * sc[r][2 * p]);
          cv[16 * p + 2 * r + 1] = int16_t(-32 * sc[r][2 * p + 1]);
        } else {  // mins, against sums over 32
          cv[16 * p + 2 * r] = mn[r][2 * p];
          cv[16 * p + 2 * r + 1] = mn[r][2 * p + 1];
        }
      }
    std::memcpy(out + P::kDOff, d, 32);
    if constexpr (!P::kSix) std::memcpy(out + P::kDOff + 32, dmin, 32);
  }
}

template <int kKind, int T>
void k_panel_tokens(const uint8_t* panel, int64_t nb, const ActBuffer& a, int64_t t0, float* y, int64_t ldy) {
  using P = KPanel<kKind>;
  __m256 acc[T];
  const int8_t* yq[T];
  const float* yd[T];
  const int16_t* ybs[T];
  for (int t = 0; t < T; ++t) {
    acc[t] = _mm256_setzero_ps();
    yq[t] = a.qs(t0 + t);
    yd[t] = a.d(t0 + t);
    ybs[t] = a.bsums(t0 + t);
  }
  for (int64_t k = 0; k < nb; ++k) {
    const uint8_t* pb = panel + size_t(k) * P::kBlockBytes;
    __m256i isum[T];
    for (int t = 0; t < T; ++t) isum[t] = _mm256_setzero_si256();
    for (int g0 = 0; g0 < 64; g0 += P::kSpan) {
      __m256i s16[T];
      for (int t = 0; t < T; ++t) s16[t] = _mm256_setzero_si256();
      for (int g = g0; g < g0 + P::kSpan; ++g) {
        const __m256i wv = _mm256_load_si256(reinterpret_cast<const __m256i*>(pb + 32 * g));
        for (int t = 0; t < T; ++t)
          s16[t] = _mm256_add_epi16(s16[t], _mm256_maddubs_epi16(wv, bcast4(yq[t] + 256 * k + 4 * g)));
      }
      const __m256i sc =
          _mm256_load_si256(reinterpret_cast<const __m256i*>(pb + P::kScaleOff + 32 * (g0 / P::kScaleGroups)));
      for (int t = 0; t < T; ++t) isum[t] = _mm256_add_epi32(isum[t], _mm256_madd_epi16(s16[t], sc));
    }
    const __m256 dx = _mm256_load_ps(reinterpret_cast<const float*>(pb + P::kDOff));
    for (int t = 0; t < T; ++t) {
      const int16_t* bs = ybs[t] + 16 * k;
      __m256i corr = _mm256_setzero_si256();
      if constexpr (P::kSix) {
        for (int p = 0; p < 8; ++p)
          corr = _mm256_add_epi32(corr, _mm256_madd_epi16(_mm256_load_si256(reinterpret_cast<const __m256i*>(
                                                             pb + P::kCorrOff + 32 * p)),
                                                         bcast4(reinterpret_cast<const int8_t*>(bs + 2 * p))));
        isum[t] = _mm256_add_epi32(isum[t], corr);
      } else {
        int16_t bs32[8];
        for (int j = 0; j < 8; ++j) bs32[j] = int16_t(bs[2 * j] + bs[2 * j + 1]);
        for (int p = 0; p < 4; ++p)
          corr = _mm256_add_epi32(corr, _mm256_madd_epi16(_mm256_load_si256(reinterpret_cast<const __m256i*>(
                                                             pb + P::kCorrOff + 32 * p)),
                                                         bcast4(reinterpret_cast<const int8_t*>(bs32 + 2 * p))));
      }
      const __m256 dy = _mm256_set1_ps(yd[t][k]);
      acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[t]), _mm256_mul_ps(dx, dy), acc[t]);
      if constexpr (!P::kSix) {
        const __m256 dm = _mm256_load_ps(reinterpret_cast<const float*>(pb + P::kDOff + 32));
        acc[t] = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(corr), _mm256_mul_ps(dm, dy), acc[t]);
      }
    }
  }
  for (int t = 0; t < T; ++t) _mm256_storeu_ps(y + t * ldy, acc[t]);
}

// The packed driver's view of the K-quant panels.
template <int kKind>
struct KPanelOps {
  static constexpr size_t kBlockBytes = KPanel<kKind>::kBlockBytes;
  static constexpr int64_t kBlockElems = 256;
  static void pack(const uint8_t* w, size_t row_bytes, int64_t nb, uint8_t* panel) {
    pack_k_panel<kKind>(w, row_bytes, nb, panel);
  }
  template <int T>
  static constexpr auto tokens = k_panel_tokens<kKind, T>;
};

}  // namespace
}  // namespace agentkv
