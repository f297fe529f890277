// Register-tiled x86 kernels shared by dot_avx2.cpp and dot_avx512.cpp. Everything here has internal
// linkage (anonymous namespace): the two files compile it with different -m flags, and one
// ODR-merged copy would let AVX-512 code leak into the AVX2 path. Only 256-bit AVX2 intrinsics are
// used; the AVX-512 build gains 32 vector registers, which it spends on larger tiles.
//
// A tile is R weight rows x T tokens. For each weight block the R rows are unpacked once to int8
// codes, then dotted against the T tokens' activation blocks with vpmaddubsw (unsigned codes x signed
// activations) + vpmaddwd; the per-block integer result is scaled in float. The integer part is exact,
// so results equal the scalar kernels up to float summation order.
//
// The shared pieces are in dot_x86_common.h, the prefill panels in dot_x86_panels.h and the AVX-512 wide
// decode tiles in dot_x86_wide_tiles.h; this file holds the 256-bit register tiles and the driver.
#pragma once

#include <immintrin.h>

#include <array>
#include <cmath>
#include <cstring>
#include <utility>
#include <vector>

#include "ops/dot_x86_common.h"
#include "ops/dot_x86_panels.h"
#include "ops/dot_x86_wide_tiles.h"
#include "ops/kernels.h"

namespace agentkv {
namespace {

template <class W, int R, int T>
void tile_legacy(const uint8_t* w, size_t row_bytes, const ActBuffer& a, int64_t t0, float* y, int64_t ldy) {
  const int64_t nb = a.cols() / 32;
  AccTile<R, T> acc;
  float msum[R][T] = {};
  const int8_t* yq[T];
  const float* yd[T];
  const uint8_t* yaux[T];
  for (int t = 0; t < T; ++t) {
    yq[t] = a.qs(t0 + t);
    yd[t] = a.d(t0 + t);
    yaux[t] = reinterpret_cast<const uint8_t*>(a.row(t0 + t)) + a.aux_off();
  }
  for (int64_t k = 0; k < nb; ++k) {
    __m256i codes[R];
    __m256 dx[R];
    float mx[R];
    for (int r = 0; r < R; ++r) {
      const uint8_t* blk = w + size_t(r) * row_bytes + size_t(k) * W::kBytes;
      if constexpr (T == 1) _mm_prefetch(reinterpret_cast<const char*>(blk + kPrefetchRows * row_bytes), _MM_HINT_T0);
      codes[r] = W::codes(blk);
      if constexpr (W::kSigned) codes[r] = _mm256_sign_epi8(codes[r], codes[r]);  // |x|; sign moves to y
      dx[r] = _mm256_set1_ps(half_at(blk));
      if constexpr (W::kMin) mx[r] = half_at(blk + 2);
    }
    for (int t = 0; t < T; ++t) {
      const __m256i yv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(yq[t] + 32 * k));
      const __m256 dy = _mm256_set1_ps(yd[t][k]);
      int32_t aux;
      std::memcpy(&aux, yaux[t] + 4 * k, 4);
      // Each lane subtracts offset x its own 4 activations' sum, so its integer equals ggml's signed-code
      // lane and the float FMA chain below rounds exactly as ggml's vec_dot / tinyBLAS does.
      __m256i lane_off = _mm256_setzero_si256();
      if constexpr (W::kLaneOffset != 0)
        lane_off = _mm256_mullo_epi32(dot_u8s8(_mm256_set1_epi8(1), yv), _mm256_set1_epi32(8 * W::kLaneOffset));
      for (int r = 0; r < R; ++r) {
        __m256i p;
        if constexpr (W::kSigned) {
          const uint8_t* blk = w + size_t(r) * row_bytes + size_t(k) * W::kBytes;
          const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 2));
          p = dot_u8s8(codes[r], _mm256_sign_epi8(yv, x));
        } else {
          p = dot_u8s8(codes[r], yv);
        }
        if constexpr (W::kLaneOffset != 0) p = _mm256_sub_epi32(p, lane_off);
        acc.v[r][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_mul_ps(dx[r], dy), acc.v[r][t]);
        if constexpr (W::kMin) {
          float s;
          std::memcpy(&s, &aux, 4);
          msum[r][t] += mx[r] * s;
        }
      }
    }
  }
  acc.store(y, ldy);
  if constexpr (W::kMin)
    for (int t = 0; t < T; ++t)
      for (int r = 0; r < R; ++r) y[t * ldy + r] += msum[r][t];
}

// ---- K-quants against Q8_K (256-element super-blocks) -------------------------------------------
// Sub-block scales multiply inside vpmaddwd, so each 32 codes cost maddubs + madd + add per pair and
// the float work happens once per super-block. Mins (Q4_K/Q5_K) and Q6_K's -32 offset are integer
// corrections through the activation bsums.
template <bool kFive, int R, int T>
void tile_q45k(const uint8_t* w, size_t row_bytes, const ActBuffer& a, int64_t t0, float* y, int64_t ldy) {
  constexpr int kBytes = kFive ? 176 : 144;
  const int64_t nb = a.cols() / 256;
  AccTile<R, T> acc;
  for (int64_t k = 0; k < nb; ++k) {
    const uint8_t* blk[R];
    __m256i sc16[R];    // the 8 sub-block scales as i16, in both 128-bit lanes
    __m256i mins16[R];  // m_j at i16 positions 2j and 2j+1, to pair with the 16 bsums
    for (int r = 0; r < R; ++r) {
      blk[r] = w + size_t(r) * row_bytes + size_t(k) * kBytes;
      if constexpr (T == 1) prefetch_span(blk[r] + kPrefetchRows * row_bytes, kBytes);
      __m128i sc8, m8;
      k_scales_mins(blk[r] + 4, &sc8, &m8);
      sc16[r] = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(sc8));
      mins16[r] = _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(m8, m8));
    }
    __m256i isum[R][T];
    for (int r = 0; r < R; ++r)
      for (int t = 0; t < T; ++t) isum[r][t] = _mm256_setzero_si256();
    for (int j = 0; j < 8; ++j) {
      for (int r = 0; r < R; ++r) {
        const __m256i q = q45k_codes<kFive>(blk[r], j);
        const __m256i scale =
            _mm256_shuffle_epi8(sc16[r], _mm256_set1_epi16(int16_t(0x0100 * (2 * j + 1) + 2 * j)));
        for (int t = 0; t < T; ++t) {
          const __m256i yv =
              _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.qs(t0 + t) + 256 * k + 32 * j));
          isum[r][t] = _mm256_add_epi32(isum[r][t], _mm256_madd_epi16(_mm256_maddubs_epi16(q, yv), scale));
        }
      }
    }
    for (int t = 0; t < T; ++t) {
      const float dy = a.d(t0 + t)[k];
      const __m256i bs = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.bsums(t0 + t) + 16 * k));
      for (int r = 0; r < R; ++r) {
        const __m256 d = _mm256_set1_ps(half_at(blk[r]) * dy);
        const __m256 dmin = _mm256_set1_ps(half_at(blk[r] + 2) * dy);
        acc.v[r][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[r][t]), d, acc.v[r][t]);
        const __m256i mm = _mm256_madd_epi16(mins16[r], bs);
        acc.v[r][t] = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(mm), dmin, acc.v[r][t]);
      }
    }
  }
  acc.store(y, ldy);
}

template <int R, int T>
void tile_q6k(const uint8_t* w, size_t row_bytes, const ActBuffer& a, int64_t t0, float* y, int64_t ldy) {
  const int64_t nb = a.cols() / 256;
  AccTile<R, T> acc;
  for (int64_t k = 0; k < nb; ++k) {
    const uint8_t* blk[R];
    __m128i sc8[R];
    for (int r = 0; r < R; ++r) {
      blk[r] = w + size_t(r) * row_bytes + size_t(k) * 210;
      if constexpr (T == 1) prefetch_span(blk[r] + kPrefetchRows * row_bytes, 210);
      sc8[r] = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk[r] + 192));
    }
    __m256i isum[R][T];
    for (int r = 0; r < R; ++r)
      for (int t = 0; t < T; ++t) isum[r][t] = _mm256_setzero_si256();
    // Vector i of half n holds elements 32i..32i+31 of that half: low (i < 2) or high nibbles of
    // ql[32*(i&1)...], high bits 2i..2i+1 of qh; its two 16-element sub-blocks use scales 8n+2i, +1.
    for (int n = 0; n < 2; ++n) {
      for (int i = 0; i < 4; ++i) {
        const int s = 8 * n + 2 * i;
        const __m128i pick = _mm_set_epi64x(int64_t(0x0101010101010101ULL * uint64_t(s + 1)),
                                            int64_t(0x0101010101010101ULL * uint64_t(s)));
        for (int r = 0; r < R; ++r) {
          const __m256i q = q6k_codes(blk[r], n, i);
          const __m256i scale = _mm256_cvtepi8_epi16(_mm_shuffle_epi8(sc8[r], pick));
          for (int t = 0; t < T; ++t) {
            const __m256i yv = _mm256_loadu_si256(
                reinterpret_cast<const __m256i*>(a.qs(t0 + t) + 256 * k + 128 * n + 32 * i));
            isum[r][t] = _mm256_add_epi32(isum[r][t], _mm256_madd_epi16(_mm256_maddubs_epi16(q, yv), scale));
          }
        }
      }
    }
    for (int t = 0; t < T; ++t) {
      const float dy = a.d(t0 + t)[k];
      const __m256i bs = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.bsums(t0 + t) + 16 * k));
      for (int r = 0; r < R; ++r) {
        // Codes were used unsigned (0..63); remove 32 * sum_sub scale * bsum exactly.
        const __m256i corr = _mm256_madd_epi16(_mm256_cvtepi8_epi16(sc8[r]), bs);
        const __m256i v = _mm256_sub_epi32(isum[r][t], _mm256_slli_epi32(corr, 5));
        acc.v[r][t] =
            _mm256_fmadd_ps(_mm256_cvtepi32_ps(v), _mm256_set1_ps(half_at(blk[r] + 208) * dy), acc.v[r][t]);
      }
    }
  }
  acc.store(y, ldy);
}

// ---- Float weights ------------------------------------------------------------------------------
struct F32W {
  static __m256 load8(const uint8_t* row, int64_t i) {
    return _mm256_loadu_ps(reinterpret_cast<const float*>(row) + i);
  }
  static float load1(const uint8_t* row, int64_t i) {
    float v;
    std::memcpy(&v, row + 4 * i, 4);
    return v;
  }
};
struct F16W {
  static __m256 load8(const uint8_t* row, int64_t i) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 2 * i)));
  }
  static float load1(const uint8_t* row, int64_t i) { return half_at(row + 2 * i); }
};
struct BF16W {
  static __m256 load8(const uint8_t* row, int64_t i) {
    const __m256i h = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 2 * i)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(h, 16));
  }
  static float load1(const uint8_t* row, int64_t i) {
    uint16_t h;
    std::memcpy(&h, row + 2 * i, 2);
    const uint32_t u = uint32_t(h) << 16;
    float v;
    std::memcpy(&v, &u, 4);
    return v;
  }
};

template <class W, int R, int T>
void tile_float(const uint8_t* w, size_t row_bytes, const ActBuffer& a, int64_t t0, float* y, int64_t ldy) {
  const int64_t n = a.cols(), n8 = n / 8 * 8;
  AccTile<R, T> acc;
  for (int64_t i = 0; i < n8; i += 8) {
    __m256 wv[R];
    for (int r = 0; r < R; ++r) wv[r] = W::load8(w + size_t(r) * row_bytes, i);
    for (int t = 0; t < T; ++t) {
      const __m256 xv = _mm256_loadu_ps(a.f32(t0 + t) + i);
      for (int r = 0; r < R; ++r) acc.v[r][t] = _mm256_fmadd_ps(wv[r], xv, acc.v[r][t]);
    }
  }
  for (int t = 0; t < T; ++t)
    for (int r = 0; r < R; ++r) {
      float s = hsum(acc.v[r][t]);
      // The tail as explicit fused multiply-adds: what a compiler's contraction setting cannot change,
      // so the wide tile's vector tail (dot_x86_wide_tiles.h) gives the same bits under GCC and clang.
      for (int64_t i = n8; i < n; ++i) s = std::fma(W::load1(w + size_t(r) * row_bytes, i), a.f32(t0 + t)[i], s);
      y[t * ldy + r] = s;
    }
}

// ---- Tiling driver ------------------------------------------------------------------------------
using TileFn = void (*)(const uint8_t*, size_t, const ActBuffer&, int64_t, float*, int64_t);

// Tile<R, T>::fn is the full-size tile; tables of every smaller shape cover the edges.
template <template <int, int> class Tile, int R, int T, size_t... I>
constexpr std::array<TileFn, R * T> tile_table(std::index_sequence<I...>) {
  return {Tile<int(I) / T + 1, int(I) % T + 1>::fn...};
}

#ifdef AGENTKV_WIDE_TILES
template <template <int, int> class Tile, int R, int P, size_t... I>
constexpr std::array<TileFn, R * P> wide_table(std::index_sequence<I...>) {
  return {Tile<int(I) / P + 1, int(I) % P + 1>::wide...};
}
#endif

// Chunks of at least this many tokens go through packed panels where the type has them.
constexpr int64_t kPackedMinTokens = 4;

// Decode (one token) uses tall tiles of kDecodeR rows; prefill uses R x T tiles. Rows outer,
// tokens inner: a tile's weight rows stay in L1 while the chunk's activations stream past.
template <template <int, int> class Tile, int kDecodeR, int R, int T>
void run_tiles(const uint8_t* w, size_t row_bytes, int64_t nrows, const ActBuffer& a, int64_t t0, int64_t t1,
               float* y, int64_t ldy, KernelPath path) {
  static constexpr auto kDecode = tile_table<Tile, kDecodeR, 1>(std::make_index_sequence<kDecodeR>());
  static constexpr auto kPrefill = tile_table<Tile, R, T>(std::make_index_sequence<R * T>());
  // Tiles of any shape give a (row, token) the same sum order, so the shape is free to change with
  // the token count; only panels vs tiles changes results.
  const bool decode = t1 - t0 == 1;
  const int rt = decode ? kDecodeR : R, tt = decode ? 1 : T;
  int64_t r = 0;
  if constexpr (requires { Tile<1, 1>::kPacked; }) {
    const bool packed = path == KernelPath::kPanels || (path == KernelPath::kAuto && t1 - t0 >= kPackedMinTokens);
    if (packed) r = Tile<1, 1>::kPacked(w, row_bytes, nrows, a, t0, t1, y, ldy);
  }
#ifdef AGENTKV_WIDE_TILES
  if constexpr (requires { Tile<1, 1>::kFloatPairs; }) {
    // Float weights, tokens outer: a group of token pairs is packed once (16 KB at 513 columns,
    // in L1) and every weight row of the chunk streams past it from L2.
    constexpr int kP = Tile<1, 1>::kFloatPairs;
    static constexpr auto kPairs = [] {
      std::array<PackedFloatTileFn, R * kP> t{};
      [&]<size_t... I>(std::index_sequence<I...>) {
        ((t[I] = Tile<int(I) / kP + 1, int(I) % kP + 1>::packed), ...);
      }(std::make_index_sequence<R * kP>());
      return t;
    }();
    if (!decode) {
      thread_local std::vector<float> storage;
      const size_t need = size_t(a.cols() / 8 * 8) * 2 * kP + 16;
      if (storage.size() < need) storage.resize(need);
      float* xp = storage.data() + (16 - (reinterpret_cast<uintptr_t>(storage.data()) / 4) % 16) % 16;
      int64_t t = t0;
      for (; t1 - t >= 2;) {
        const int pairs = int(std::min<int64_t>(kP, (t1 - t) / 2));
        pack_float_pairs(a, t, pairs, xp);
        for (int64_t rr = 0; rr < nrows; rr += R)
          kPairs[size_t((std::min<int64_t>(R, nrows - rr) - 1) * kP + (pairs - 1))](
              w + size_t(rr) * row_bytes, row_bytes, a, t, xp, y + (t - t0) * ldy + rr, ldy);
        t += 2 * pairs;
      }
      for (int64_t rr = 0; t < t1 && rr < nrows; rr += R)
        kPrefill[size_t((std::min<int64_t>(R, nrows - rr) - 1) * T)](w + size_t(rr) * row_bytes, row_bytes, a, t,
                                                                     y + (t - t0) * ldy + rr, ldy);
      return;
    }
  }
#endif
  for (; r < nrows; r += rt) {
    const int rn = int(std::min<int64_t>(rt, nrows - r));
    int64_t t = t0;
#ifdef AGENTKV_WIDE_TILES
    if constexpr (requires { Tile<1, 1>::kWidePairs; }) {
      // Pairs of tokens through the wide tiles (same results, shared unpacking); an odd last token
      // takes the 256-bit tile.
      constexpr int kP = Tile<1, 1>::kWidePairs;
      static constexpr auto kWide = wide_table<Tile, R, kP>(std::make_index_sequence<R * kP>());
      while (t1 - t >= 2) {
        const int pairs = int(std::min<int64_t>(kP, (t1 - t) / 2));
        kWide[size_t((rn - 1) * kP + (pairs - 1))](w + size_t(r) * row_bytes, row_bytes, a, t,
                                                   y + (t - t0) * ldy + r, ldy);
        t += 2 * pairs;
      }
    }
#endif
    for (; t < t1; t += tt) {
      const int tn = int(std::min<int64_t>(tt, t1 - t));
      const TileFn fn = decode ? kDecode[size_t(rn - 1)] : kPrefill[size_t((rn - 1) * T + (tn - 1))];
      fn(w + size_t(r) * row_bytes, row_bytes, a, t, y + (t - t0) * ldy + r, ldy);
    }
  }
}

template <class W>
struct Legacy {
  template <int R, int T>
  struct Tile {
    static constexpr TileFn fn = tile_legacy<W, R, T>;
    static constexpr auto kPacked = run_packed<LegacyPanelOps<W>, 4>;
#ifdef AGENTKV_WIDE_TILES
    static constexpr int kWidePairs = 4;
    static constexpr TileFn wide = wide_legacy<W, R, T>;  // T: token pairs
#endif
  };
};
template <bool kFive>
struct Q45K {
  template <int R, int T>
  struct Tile {
    static constexpr TileFn fn = tile_q45k<kFive, R, T>;
    static constexpr auto kPacked = run_packed<KPanelOps<kFive ? 5 : 4>, 4>;
#ifdef AGENTKV_WIDE_TILES
    static constexpr int kWidePairs = 2;
    static constexpr TileFn wide = wide_q45k<kFive, R, T>;
#endif
  };
};
template <int R, int T>
struct Q6KTile {
  static constexpr TileFn fn = tile_q6k<R, T>;
  static constexpr auto kPacked = run_packed<KPanelOps<6>, 4>;
#ifdef AGENTKV_WIDE_TILES
  static constexpr int kWidePairs = 2;
  static constexpr TileFn wide = wide_q6k<R, T>;
#endif
};
template <class W>
struct Float {
  template <int R, int T>
  struct Tile {
    static constexpr TileFn fn = tile_float<W, R, T>;
#ifdef AGENTKV_WIDE_TILES
    static constexpr int kFloatPairs = 4;
    static constexpr PackedFloatTileFn packed = wide_float<W, R, T>;  // T: token pairs
#endif
  };
};

// The kernel table of one ISA build, given its tile sizes.
template <int kDecodeR, int R, int T>
MatmulKernel x86_kernel(GgmlType type) {
  switch (type) {
    case GgmlType::F32:
      return run_tiles<Float<F32W>::Tile, kDecodeR, R, T>;
    case GgmlType::F16:
      return run_tiles<Float<F16W>::Tile, kDecodeR, R, T>;
    case GgmlType::BF16:
      return run_tiles<Float<BF16W>::Tile, kDecodeR, R, T>;
    case GgmlType::Q4_0:
      return run_tiles<Legacy<Q4_0W>::Tile, kDecodeR, R, T>;
    case GgmlType::Q4_1:
      return run_tiles<Legacy<Q4_1W>::Tile, kDecodeR, R, T>;
    case GgmlType::Q5_0:
      return run_tiles<Legacy<Q5_0W>::Tile, kDecodeR, R, T>;
    case GgmlType::Q5_1:
      return run_tiles<Legacy<Q5_1W>::Tile, kDecodeR, R, T>;
    case GgmlType::Q8_0:
      return run_tiles<Legacy<Q8_0W>::Tile, kDecodeR, R, T>;
    case GgmlType::Q4_K:
      return run_tiles<Q45K<false>::Tile, kDecodeR, R, T>;
    case GgmlType::Q5_K:
      return run_tiles<Q45K<true>::Tile, kDecodeR, R, T>;
    case GgmlType::Q6_K:
      return run_tiles<Q6KTile, kDecodeR, R, T>;
    default:
      return nullptr;
  }
}

}  // namespace
}  // namespace agentkv
