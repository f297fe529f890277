#include "ops/kernels.h"

namespace agentkv {
MatmulKernel avx512_kernel(GgmlType) { return nullptr; }
}  // namespace agentkv
