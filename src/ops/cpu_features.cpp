#include "ops/cpu_features.h"

#include <atomic>
#include <cstdlib>
#include <cstring>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

namespace agentkv {
namespace {

IsaLevel detect() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  // F16C via CPUID leaf 1, ECX bit 29: clang's __builtin_cpu_supports does not know "f16c".
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  const bool f16c = __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & (1u << 29)) != 0;
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && f16c;
  if (!avx2) return IsaLevel::kScalar;
  const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
  if (!avx512) return IsaLevel::kAvx2;
  return __builtin_cpu_supports("avx512vnni") ? IsaLevel::kAvx512Vnni : IsaLevel::kAvx512;
#else
  return IsaLevel::kScalar;
#endif
}

IsaLevel clamp(IsaLevel want) {
  const IsaLevel have = detected_isa_level();
  return int(want) < int(have) ? want : have;
}

IsaLevel from_env() {
  const IsaLevel have = detected_isa_level();
  const char* env = std::getenv("AGENTKV_ISA");
  if (env == nullptr || *env == '\0') return have;
  if (std::strcmp(env, "scalar") == 0) return IsaLevel::kScalar;
  if (std::strcmp(env, "avx2") == 0) return clamp(IsaLevel::kAvx2);
  if (std::strcmp(env, "avx512") == 0) return clamp(IsaLevel::kAvx512);
  if (std::strcmp(env, "avx512vnni") == 0) return clamp(IsaLevel::kAvx512Vnni);
  return have;  // unknown value: behave as if unset rather than fail deep inside a matmul
}

std::atomic<int>& active_slot() {
  static std::atomic<int> slot{int(from_env())};
  return slot;
}

}  // namespace

IsaLevel detected_isa_level() {
  static const IsaLevel level = detect();
  return level;
}

IsaLevel active_isa_level() { return IsaLevel(active_slot().load(std::memory_order_relaxed)); }

const char* isa_level_name(IsaLevel level) {
  switch (level) {
    case IsaLevel::kScalar:
      return "scalar";
    case IsaLevel::kAvx2:
      return "avx2";
    case IsaLevel::kAvx512:
      return "avx512";
    case IsaLevel::kAvx512Vnni:
      return "avx512vnni";
  }
  return "unknown";
}

IsaLevel set_isa_level_for_testing(IsaLevel level) {
  const IsaLevel got = clamp(level);
  active_slot().store(int(got), std::memory_order_relaxed);
  return got;
}

}  // namespace agentkv
