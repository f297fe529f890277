// The AVX-512 tiles again with VNNI (vpdpbusd): the wide decode tiles' int8 dot products take one
// instruction instead of two. Same integers, same float order: results equal dot_avx512.cpp's.
// GCC 12's AVX-512 intrinsics trip -Wmaybe-uninitialized (see dot_avx512.cpp).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#include "ops/dot_x86_tiles.h"

namespace agentkv {
MatmulKernel avx512vnni_kernel(GgmlType t) { return x86_kernel</*decode rows*/ 4, /*R*/ 4, /*T*/ 4>(t); }
}  // namespace agentkv
