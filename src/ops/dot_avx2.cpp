#include "ops/kernels.h"

namespace agentkv {
MatmulKernel avx2_kernel(GgmlType) { return nullptr; }
}  // namespace agentkv
