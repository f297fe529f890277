// Run-time instruction-set selection. The binary is built for baseline x86-64; kernels compiled for
// AVX2 / AVX-512 are only called when the CPU (and the AGENTKV_ISA override) allows them.
#pragma once

namespace agentkv {

enum class IsaLevel { kScalar = 0, kAvx2 = 1, kAvx512 = 2, kAvx512Vnni = 3 };

// What the CPU supports: AVX2 needs AVX2+FMA+F16C; AVX-512 needs F/BW/VL/DQ (plus the AVX2 set);
// AVX-512 VNNI adds the int8 dot-product instruction (Ice Lake, Zen 4 and later). Every level gives
// the same (row, token) results as AVX-512 for the same kernel family; VNNI only takes fewer steps.
IsaLevel detected_isa_level();

// The level kernels use: detected, lowered by AGENTKV_ISA=scalar|avx2|avx512|avx512vnni (an override above
// what the CPU supports is clamped, so a stale env var cannot cause SIGILL).
IsaLevel active_isa_level();
const char* isa_level_name(IsaLevel level);
inline const char* active_isa_name() { return isa_level_name(active_isa_level()); }

// Tests and benchmarks switch levels in-process; clamped to the detected level like the env var.
// Returns the level actually set. Not thread-safe against concurrent matmuls.
IsaLevel set_isa_level_for_testing(IsaLevel level);

}  // namespace agentkv
