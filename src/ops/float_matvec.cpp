#include "ops/float_matvec.h"

#include <algorithm>
#include <vector>

#include "ops/quant.h"
#include "util/status.h"

namespace agentkv {
namespace {

const uint8_t* matvec_row_ptr(const WeightView& w, int64_t r) { return static_cast<const uint8_t*>(w.data) + size_t(r) * w.row_bytes; }

constexpr int64_t kMatvecRowsPerTask = 64;

}  // namespace

void matvec_f32(const WeightView& w, const float* x, int64_t r0, int64_t r1, float* y, ThreadPool& pool) {
  AGENTKV_CHECK(is_matmul_type(w.type) && 0 <= r0 && r0 <= r1 && r1 <= w.rows);
  const int64_t cols = w.cols;
  pool.parallel_for(r1 - r0, kMatvecRowsPerTask, [&](int64_t b, int64_t e) {
    std::vector<float> row(static_cast<size_t>(cols));
    for (int64_t i = b; i < e; ++i) {
      dequantize_row(w.type, matvec_row_ptr(w, r0 + i), row.data(), cols);
      double s = 0;
      for (int64_t c = 0; c < cols; ++c) s += double(row[size_t(c)]) * double(x[c]);
      y[i] = float(s);
    }
  });
}

void matvec_transposed_add_f32(const WeightView& w, const float* dy, float* dx, ThreadPool& pool) {
  AGENTKV_CHECK(is_matmul_type(w.type));
  const int64_t cols = w.cols, n_chunks = (w.rows + kMatvecRowsPerTask - 1) / kMatvecRowsPerTask;
  // One partial sum per fixed chunk of rows, added in chunk order: the result does not depend on how
  // the pool splits the chunks.
  std::vector<double> partial(static_cast<size_t>(n_chunks * cols), 0.0);
  pool.parallel_for(n_chunks, 1, [&](int64_t b, int64_t e) {
    std::vector<float> row(static_cast<size_t>(cols));
    for (int64_t chunk = b; chunk < e; ++chunk) {
      double* acc = partial.data() + chunk * cols;
      const int64_t r_end = std::min(w.rows, (chunk + 1) * kMatvecRowsPerTask);
      for (int64_t r = chunk * kMatvecRowsPerTask; r < r_end; ++r) {
        if (dy[r] == 0.0f) continue;
        dequantize_row(w.type, matvec_row_ptr(w, r), row.data(), cols);
        const double g = dy[r];
        for (int64_t c = 0; c < cols; ++c) acc[c] += g * double(row[size_t(c)]);
      }
    }
  });
  for (int64_t c = 0; c < cols; ++c) {
    double s = 0;
    for (int64_t chunk = 0; chunk < n_chunks; ++chunk) s += partial[size_t(chunk * cols + c)];
    dx[c] += float(s);
  }
}

}  // namespace agentkv
