// AVX2 + FMA + F16C kernels. 16 ymm registers: a 4 x 2 prefill tile keeps 8 accumulators, 4 unpacked
// weight blocks and the working set in registers.
#include "ops/dot_x86_tiles.h"

namespace agentkv {
MatmulKernel avx2_kernel(GgmlType t) { return x86_kernel</*decode rows*/ 4, /*R*/ 4, /*T*/ 2>(t); }
}  // namespace agentkv
