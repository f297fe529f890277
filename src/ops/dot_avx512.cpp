// AVX-512 (F/BW/VL/DQ) build of the same tiles: 32 vector registers fit a 4 x 4 tile without spills,
// so each unpacked weight block is reused across twice as many tokens.
// GCC 12's AVX-512 intrinsics build their results from _mm512_undefined_*(), which -Wmaybe-uninitialized
// reports at every inlined use (GCC bug 105593, fixed in GCC 13); nothing of ours is uninitialized.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#include "ops/dot_x86_tiles.h"

namespace agentkv {
MatmulKernel avx512_kernel(GgmlType t) { return x86_kernel</*decode rows*/ 4, /*R*/ 4, /*T*/ 4>(t); }
}  // namespace agentkv
