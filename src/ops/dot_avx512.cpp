// AVX-512 (F/BW/VL/DQ) build of the same tiles: 32 vector registers fit a 4 x 4 tile without spills,
// so each unpacked weight block is reused across twice as many tokens.
#include "ops/dot_x86_tiles.h"

namespace agentkv {
MatmulKernel avx512_kernel(GgmlType t) { return x86_kernel</*decode rows*/ 4, /*R*/ 4, /*T*/ 4>(t); }
}  // namespace agentkv
