// Throughput printout, not a test: disabled by default, run with
//   AGENTKV_ISA=avx2 ./agentkv_unit_tests --gtest_also_run_disabled_tests --gtest_filter='*MatmulBench*'
// No timing assertions: the machine is shared.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <random>
#include <vector>

#include "ops/cpu_features.h"
#include "ops/fp16.h"
#include "ops/matmul.h"
#include "ops/quant.h"

namespace agentkv {
namespace {

void bench(GgmlType type, int64_t cols, int64_t rows, int64_t n_tokens, ThreadPool& pool) {
  const size_t rb = type_row_bytes(type, cols);
  std::vector<uint8_t> w(rb * size_t(rows));
  std::mt19937 rng(1);
  for (auto& b : w) b = uint8_t(rng());
  if (type == GgmlType::F32)  // finite, normal values (random bytes would hold NaNs and denormals)
    for (size_t i = 0; i < w.size() / 4; ++i) {
      const float v = float(int(rng() % 2001) - 1000) * 1e-3f;
      std::memcpy(w.data() + 4 * i, &v, 4);
    }
  if (type == GgmlType::F32)  // finite, normal values (random bytes would hold NaNs and denormals)
    for (size_t i = 0; i < w.size() / 4; ++i) {
      const float v = float(int(rng() % 2001) - 1000) * 1e-3f;
      std::memcpy(w.data() + 4 * i, &v, 4);
    }
  const int bb = ggml_type_info(uint32_t(type))->block_bytes;
  const int dpos = type == GgmlType::Q6_K ? 208 : 0;
  for (size_t off = 0; off < w.size(); off += size_t(bb)) {
    const uint16_t h = f32_to_fp16(0.01f);
    std::memcpy(w.data() + off + dpos, &h, 2);
    if (type == GgmlType::Q4_1 || type == GgmlType::Q4_K) std::memcpy(w.data() + off + 2, &h, 2);
  }
  std::vector<float> x(size_t(cols * n_tokens)), y(size_t(rows * n_tokens));
  std::normal_distribution<float> g;
  for (auto& v : x) v = g(rng);
  const WeightView view{type, cols, rows, w.data(), rb};
  matmul(view, x.data(), n_tokens, y.data(), pool);
  // Single-threaded runs report the calling thread's CPU time: the build machine is shared, and
  // wall time there mostly measures the neighbours.
  const auto cpu_now = [] {
    timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
  };
  const auto t0 = std::chrono::steady_clock::now();
  const double c0 = cpu_now();
  int iters = 0;
  double secs = 0;
  do {
    matmul(view, x.data(), n_tokens, y.data(), pool);
    ++iters;
    secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  } while (secs < 0.3);
  const double per = (pool.size() == 1 ? cpu_now() - c0 : secs) / iters;
  std::printf(
      "%-6s %-5s %6lldx%-6lld tokens=%-4lld threads=%d  %9.1f us  %7.1f GFLOP/s  %6.1f GB/s weights\n",
      active_isa_name(), ggml_type_info(uint32_t(type))->name, (long long)cols, (long long)rows,
      (long long)n_tokens, pool.size(), per * 1e6, 2.0 * cols * rows * n_tokens / per * 1e-9,
      double(w.size()) / per * 1e-9);
}

TEST(MatmulBench, DISABLED_ModelShapes) {
  const char* env = std::getenv("AGENTKV_BENCH_THREADS");
  ThreadPool pool(env ? std::atoi(env) : 2);
  for (int64_t n : {1, 512}) {
    bench(GgmlType::Q4_1, 576, 1536, n, pool);
    bench(GgmlType::Q4_1, 1536, 576, n, pool);
    bench(GgmlType::Q4_1, 576, 576, n, pool);
    bench(GgmlType::Q5_0, 640, 2048, n, pool);
    bench(GgmlType::Q8_0, 640, 1024, n, pool);
    bench(GgmlType::Q4_K, 2048, 640, n, pool);
    bench(GgmlType::Q6_K, 2048, 640, n, pool);
  }
  // A transfer map's projection (Gemma 3 -> SmolLM2: 2 x 256 K/V + bias in, 2 x 192 out), one 1k context.
  bench(GgmlType::F32, 513, 384, 1032, pool);
  // A transfer map's projection (Gemma 3 -> SmolLM2: 2 x 256 K/V + bias in, 2 x 192 out), one 1k context.
  bench(GgmlType::F32, 513, 384, 1032, pool);
  bench(GgmlType::Q8_0, 576, 49152, 1, pool);
  bench(GgmlType::Q8_0, 640, 262144, 1, pool);  // Gemma 3 270M tied LM head (decode)
}

}  // namespace
}  // namespace agentkv
