// Scalar dequantization, written to follow the formulas of models.md §3 term by term: this is the
// ground truth every SIMD kernel and the quantized-activation matmul are tested against.
#include <cstring>

#include "ops/fp16.h"
#include "ops/quant.h"
#include "util/status.h"

namespace agentkv {
namespace {

// Q5_0 / Q5_1: bit j of the little-endian qh word is bit 4 of element j.
void unpack_q5(const uint8_t* qh_bytes, const uint8_t* qs, int* out32) {
  uint32_t qh;
  std::memcpy(&qh, qh_bytes, 4);
  for (int j = 0; j < 16; ++j) {
    const int xh0 = int(((qh >> j) << 4) & 0x10);
    const int xh1 = int((qh >> (j + 12)) & 0x10);
    out32[j] = (qs[j] & 0xF) | xh0;
    out32[j + 16] = (qs[j] >> 4) | xh1;
  }
}

}  // namespace

// Six-bit packed (scale, min) pair j of a Q4_K / Q5_K super-block.
void k_scale_min(int j, const uint8_t* q, int* sc, int* m) {
  if (j < 4) {
    *sc = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *sc = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
    *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}

bool is_matmul_type(GgmlType t) {
  switch (t) {
    case GgmlType::F32: case GgmlType::F16: case GgmlType::BF16: case GgmlType::Q4_0:
    case GgmlType::Q4_1: case GgmlType::Q5_0: case GgmlType::Q5_1: case GgmlType::Q8_0:
    case GgmlType::Q4_K: case GgmlType::Q5_K: case GgmlType::Q6_K:
      return true;
    default:
      return false;
  }
}

size_t type_row_bytes(GgmlType t, int64_t n) {
  const GgmlTypeInfo* info = ggml_type_info(uint32_t(t));
  AGENTKV_CHECK(info != nullptr && n % info->block_elems == 0);
  return size_t(n / info->block_elems) * size_t(info->block_bytes);
}

void dequantize_row(GgmlType t, const void* src, float* y, int64_t n) {
  const auto* b = static_cast<const uint8_t*>(src);
  AGENTKV_CHECK(is_matmul_type(t));
  const GgmlTypeInfo* info = ggml_type_info(uint32_t(t));
  AGENTKV_CHECK(n % info->block_elems == 0);
  const int64_t nb = n / info->block_elems;
  int q[32];
  for (int64_t i = 0; i < nb; ++i, b += info->block_bytes, y += info->block_elems) {
    switch (t) {
      case GgmlType::F32: std::memcpy(y, b, 4); break;
      case GgmlType::F16: y[0] = load_fp16(b); break;
      case GgmlType::BF16: {
        uint16_t h;
        std::memcpy(&h, b, 2);
        y[0] = bf16_to_f32(h);
        break;
      }
      case GgmlType::Q4_0: {
        const float d = load_fp16(b);
        for (int j = 0; j < 16; ++j) {
          y[j] = float((b[2 + j] & 0xF) - 8) * d;
          y[j + 16] = float((b[2 + j] >> 4) - 8) * d;
        }
        break;
      }
      case GgmlType::Q4_1: {
        const float d = load_fp16(b), m = load_fp16(b + 2);
        for (int j = 0; j < 16; ++j) {
          y[j] = float(b[4 + j] & 0xF) * d + m;
          y[j + 16] = float(b[4 + j] >> 4) * d + m;
        }
        break;
      }
      case GgmlType::Q5_0: {
        const float d = load_fp16(b);
        unpack_q5(b + 2, b + 6, q);
        for (int j = 0; j < 32; ++j) y[j] = float(q[j] - 16) * d;
        break;
      }
      case GgmlType::Q5_1: {
        const float d = load_fp16(b), m = load_fp16(b + 2);
        unpack_q5(b + 4, b + 8, q);
        for (int j = 0; j < 32; ++j) y[j] = float(q[j]) * d + m;
        break;
      }
      case GgmlType::Q8_0: {
        const float d = load_fp16(b);
        for (int j = 0; j < 32; ++j) y[j] = float(int8_t(b[2 + j])) * d;
        break;
      }
      case GgmlType::Q4_K:
      case GgmlType::Q5_K: {
        const bool five = t == GgmlType::Q5_K;
        const float d = load_fp16(b), dmin = load_fp16(b + 2);
        const uint8_t* scales = b + 4;
        const uint8_t* qh = b + 16;
        const uint8_t* ql = five ? b + 48 : b + 16;
        for (int g = 0; g < 4; ++g, ql += 32) {
          int sc1, m1, sc2, m2;
          k_scale_min(2 * g, scales, &sc1, &m1);
          k_scale_min(2 * g + 1, scales, &sc2, &m2);
          const float d1 = d * float(sc1), mm1 = dmin * float(m1);
          const float d2 = d * float(sc2), mm2 = dmin * float(m2);
          const int u1 = 1 << (2 * g), u2 = 2 << (2 * g);
          for (int l = 0; l < 32; ++l) {
            const int h1 = five && (qh[l] & u1) ? 16 : 0;
            const int h2 = five && (qh[l] & u2) ? 16 : 0;
            y[64 * g + l] = d1 * float((ql[l] & 0xF) + h1) - mm1;
            y[64 * g + 32 + l] = d2 * float((ql[l] >> 4) + h2) - mm2;
          }
        }
        break;
      }
      case GgmlType::Q6_K: {
        const float d = load_fp16(b + 208);
        const uint8_t* ql = b;
        const uint8_t* qh = b + 128;
        const auto* sc = reinterpret_cast<const int8_t*>(b + 192);
        float* yy = y;
        for (int half = 0; half < 2; ++half, ql += 64, qh += 32, sc += 8, yy += 128) {
          for (int l = 0; l < 32; ++l) {
            const int is = l / 16;
            const int q1 = ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
            const int q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
            const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
            const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
            yy[l] = d * float(sc[is + 0]) * float(q1);
            yy[l + 32] = d * float(sc[is + 2]) * float(q2);
            yy[l + 64] = d * float(sc[is + 4]) * float(q3);
            yy[l + 96] = d * float(sc[is + 6]) * float(q4);
          }
        }
        break;
      }
      default: AGENTKV_CHECK(false);
    }
  }
}

}  // namespace agentkv
