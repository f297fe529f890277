// The ggml tensor type ids used in GGUF files and their block geometry
// (ggml-org/llama.cpp ggml/src/ggml-common.h; see ../shared/reference/models.md §3).
// The GGUF reader uses this to size tensors; ops uses it to pick kernels.
#pragma once

#include <cstdint>

namespace agentkv {

enum class GgmlType : uint32_t {
  F32 = 0,
  F16 = 1,
  Q4_0 = 2,
  Q4_1 = 3,
  Q5_0 = 6,
  Q5_1 = 7,
  Q8_0 = 8,
  Q8_1 = 9,
  Q2_K = 10,
  Q3_K = 11,
  Q4_K = 12,
  Q5_K = 13,
  Q6_K = 14,
  Q8_K = 15,
  I8 = 24,
  I16 = 25,
  I32 = 26,
  I64 = 27,
  F64 = 28,
  BF16 = 30,
};

struct GgmlTypeInfo {
  const char* name;
  int32_t block_elems;  // elements per block
  int32_t block_bytes;  // bytes per block
};

// Geometry of a type id, or nullptr when the id is unknown to agentkv.
const GgmlTypeInfo* ggml_type_info(uint32_t type_id);

}  // namespace agentkv
