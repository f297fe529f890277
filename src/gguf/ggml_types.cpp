#include "gguf/ggml_types.h"

namespace agentkv {

const GgmlTypeInfo* ggml_type_info(uint32_t id) {
  static const GgmlTypeInfo kF32{"F32", 1, 4}, kF16{"F16", 1, 2}, kQ4_0{"Q4_0", 32, 18},
      kQ4_1{"Q4_1", 32, 20}, kQ5_0{"Q5_0", 32, 22}, kQ5_1{"Q5_1", 32, 24}, kQ8_0{"Q8_0", 32, 34},
      kQ8_1{"Q8_1", 32, 36}, kQ2_K{"Q2_K", 256, 84}, kQ3_K{"Q3_K", 256, 110}, kQ4_K{"Q4_K", 256, 144},
      kQ5_K{"Q5_K", 256, 176}, kQ6_K{"Q6_K", 256, 210}, kQ8_K{"Q8_K", 256, 292}, kI8{"I8", 1, 1},
      kI16{"I16", 1, 2}, kI32{"I32", 1, 4}, kI64{"I64", 1, 8}, kF64{"F64", 1, 8}, kBF16{"BF16", 1, 2};
  switch (static_cast<GgmlType>(id)) {
    case GgmlType::F32: return &kF32;
    case GgmlType::F16: return &kF16;
    case GgmlType::Q4_0: return &kQ4_0;
    case GgmlType::Q4_1: return &kQ4_1;
    case GgmlType::Q5_0: return &kQ5_0;
    case GgmlType::Q5_1: return &kQ5_1;
    case GgmlType::Q8_0: return &kQ8_0;
    case GgmlType::Q8_1: return &kQ8_1;
    case GgmlType::Q2_K: return &kQ2_K;
    case GgmlType::Q3_K: return &kQ3_K;
    case GgmlType::Q4_K: return &kQ4_K;
    case GgmlType::Q5_K: return &kQ5_K;
    case GgmlType::Q6_K: return &kQ6_K;
    case GgmlType::Q8_K: return &kQ8_K;
    case GgmlType::I8: return &kI8;
    case GgmlType::I16: return &kI16;
    case GgmlType::I32: return &kI32;
    case GgmlType::I64: return &kI64;
    case GgmlType::F64: return &kF64;
    case GgmlType::BF16: return &kBF16;
  }
  return nullptr;
}

}  // namespace agentkv
