// Register-tiled x86 kernels shared by dot_avx2.cpp and dot_avx512.cpp. Everything here has internal
// linkage (anonymous namespace): the two files compile it with different -m flags, and one
// ODR-merged copy would let AVX-512 code leak into the AVX2 path. Only 256-bit AVX2 intrinsics are
// used; the AVX-512 build gains 32 vector registers, which it spends on larger tiles.
//
// A tile is R weight rows x T tokens. For each weight block the R rows are unpacked once to int8
// codes, then dotted against the T tokens' activation blocks with vpmaddubsw (unsigned codes x signed
// activations) + vpmaddwd; the per-block integer result is scaled in float. The integer part is exact,
// so results equal the scalar kernels up to float summation order.
#pragma once

#include <immintrin.h>

#include <array>
#include <cstring>
#include <utility>
#include <vector>

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
      for (int64_t i = n8; i < n; ++i) s += W::load1(w + size_t(r) * row_bytes, i) * a.f32(t0 + t)[i];
      y[t * ldy + r] = s;
    }
}

// ---- Wide decode tiles (AVX-512 build only) ----------------------------------------------------
// Two tokens per 512-bit vector: lanes 0-7 hold token t's eight partial sums, lanes 8-15 token t+1's.
// Each half goes through exactly the integer and float operations the 256-bit tiles above apply to one
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
#endif  // AVX-512

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
