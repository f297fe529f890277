#include "ops/float_matvec.h"

#include <algorithm>
#include <vector>

#include "ops/quant.h"
#include "util/status.h"

namespace agentkv {
namespace {

const uint8_t* matvec_row_ptr(const WeightView& w, int64_t r) { return static_cast<const uint8_t*>(w.data) + size_t(r) * w.row_bytes; }

constexpr int64_t kMatvecRowsPerTask = 64;

// Four rows' sums at once: four independent chains, each in column order (as one row alone).
void dot4(const float* rows, int64_t cols, const float* x, double out[4]) {
  const float *a = rows, *b = rows + cols, *c = rows + 2 * cols, *d = rows + 3 * cols;
  double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  for (int64_t i = 0; i < cols; ++i) {
    const double xi = x[i];
    s0 += double(a[i]) * xi;
    s1 += double(b[i]) * xi;
    s2 += double(c[i]) * xi;
    s3 += double(d[i]) * xi;
  }
  out[0] = s0, out[1] = s1, out[2] = s2, out[3] = s3;
}

double dot1(const float* row, int64_t cols, const float* x) {
  double s = 0;
  for (int64_t i = 0; i < cols; ++i) s += double(row[i]) * double(x[i]);
  return s;
}

}  // namespace

void matvec_f32_many(const WeightView& w, std::span<const float* const> xs, int64_t r0, int64_t r1,
                     std::span<float* const> ys, ThreadPool& pool) {
  AGENTKV_CHECK(is_matmul_type(w.type) && 0 <= r0 && r0 <= r1 && r1 <= w.rows && xs.size() == ys.size());
  if (xs.empty()) return;
  const int64_t cols = w.cols;
  pool.parallel_for(r1 - r0, kMatvecRowsPerTask, [&](int64_t b, int64_t e) {
    std::vector<float> rows(static_cast<size_t>(4 * cols));
    for (int64_t i = b; i < e; i += 4) {
      const int64_t n = std::min<int64_t>(4, e - i);
      for (int64_t k = 0; k < n; ++k)
        dequantize_row(w.type, matvec_row_ptr(w, r0 + i + k), rows.data() + k * cols, cols);
      for (size_t v = 0; v < xs.size(); ++v) {
        if (n == 4) {
          double s[4];
          dot4(rows.data(), cols, xs[v], s);
          for (int k = 0; k < 4; ++k) ys[v][i + k] = float(s[k]);
        } else {
          for (int64_t k = 0; k < n; ++k) ys[v][i + k] = float(dot1(rows.data() + k * cols, cols, xs[v]));
        }
      }
    }
  });
}

void matvec_f32(const WeightView& w, const float* x, int64_t r0, int64_t r1, float* y, ThreadPool& pool) {
  const float* xs[] = {x};
  float* ys[] = {y};
  matvec_f32_many(w, xs, r0, r1, ys, pool);
}

void matvec_transposed_add_f32_many(const WeightView& w, std::span<const float* const> dys, std::span<float* const> dxs,
                                    ThreadPool& pool) {
  AGENTKV_CHECK(is_matmul_type(w.type) && dys.size() == dxs.size());
  if (dys.empty()) return;
  const int64_t cols = w.cols, n_chunks = (w.rows + kMatvecRowsPerTask - 1) / kMatvecRowsPerTask;
  const size_t nv = dys.size();
  // One partial sum per vector and fixed chunk of rows, added in chunk order: the result does not
  // depend on how the pool splits the chunks, nor on the other vectors.
  std::vector<double> partial(nv * size_t(n_chunks * cols), 0.0);
  pool.parallel_for(n_chunks, 1, [&](int64_t b, int64_t e) {
    std::vector<float> row(static_cast<size_t>(cols));
    for (int64_t chunk = b; chunk < e; ++chunk) {
      const int64_t r_end = std::min(w.rows, (chunk + 1) * kMatvecRowsPerTask);
      for (int64_t r = chunk * kMatvecRowsPerTask; r < r_end; ++r) {
        bool any = false;
        for (size_t v = 0; v < nv && !any; ++v) any = dys[v][r] != 0.0f;
        if (!any) continue;
        dequantize_row(w.type, matvec_row_ptr(w, r), row.data(), cols);
        for (size_t v = 0; v < nv; ++v) {
          if (dys[v][r] == 0.0f) continue;
          double* acc = partial.data() + (v * size_t(n_chunks) + size_t(chunk)) * size_t(cols);
          const double g = dys[v][r];
          for (int64_t c = 0; c < cols; ++c) acc[c] += g * double(row[size_t(c)]);
        }
      }
    }
  });
  for (size_t v = 0; v < nv; ++v) {
    const double* pv = partial.data() + v * size_t(n_chunks * cols);
    for (int64_t c = 0; c < cols; ++c) {
      double s = 0;
      for (int64_t chunk = 0; chunk < n_chunks; ++chunk) s += pv[size_t(chunk * cols + c)];
      dxs[v][c] += float(s);
    }
  }
}

void matvec_transposed_add_f32(const WeightView& w, const float* dy, float* dx, ThreadPool& pool) {
  const float* dys[] = {dy};
  float* dxs[] = {dx};
  matvec_transposed_add_f32_many(w, dys, dxs, pool);
}

}  // namespace agentkv
