#include "ops/matmul.h"

#include <algorithm>

#include "ops/cpu_features.h"
#include "ops/kernels.h"
#include "ops/quant.h"
#include "util/status.h"

namespace agentkv {
namespace {

constexpr int kTypeSlots = 32;

// Kernel tables per ISA level, filled once; a level without its own kernel for a type inherits
// the next lower level's, so every slot of a supported type is non-null.
struct KernelTables {
  MatmulKernel fn[4][kTypeSlots] = {};
  KernelTables() {
    for (int t = 0; t < kTypeSlots; ++t) {
      const auto type = GgmlType(t);
      fn[0][t] = scalar_kernel(type);
      MatmulKernel k2 = avx2_kernel(type);
      fn[1][t] = k2 ? k2 : fn[0][t];
      MatmulKernel k5 = avx512_kernel(type);
      fn[2][t] = k5 ? k5 : fn[1][t];
      MatmulKernel kv = avx512vnni_kernel(type);
      fn[3][t] = kv ? kv : fn[2][t];
    }
  }
};

MatmulKernel pick_kernel(GgmlType t) {
  static const KernelTables tables;
  AGENTKV_CHECK(uint32_t(t) < kTypeSlots);
  MatmulKernel k = tables.fn[int(active_isa_level())][uint32_t(t)];
  AGENTKV_CHECK(k != nullptr);
  return k;
}

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

}  // namespace

namespace {

// Tokens [t_begin, t_end) in parallel (row chunk, token chunk) rectangles through one kernel path.
void run_token_range(MatmulKernel kernel, KernelPath path, const WeightView& w, const ActBuffer& acts, int64_t r0,
                     int64_t nrows, int64_t t_begin, int64_t t_end, float* y, ThreadPool& pool) {
  const int64_t n_tokens = t_end - t_begin;
  if (n_tokens <= 0) return;
  // Decode splits rows finely so both threads get equal shares of the weight stream; prefill uses
  // chunks whose weights (64 rows) stay in L1/L2 while a token chunk's activations stream past them.
  const int64_t nthreads = pool.size();
  int64_t row_chunk, tok_chunk;
  if (n_tokens <= 4) {
    row_chunk = std::clamp<int64_t>(ceil_div(ceil_div(nrows, nthreads * 8), 4) * 4, 4, 512);
    tok_chunk = n_tokens;
  } else {
    row_chunk = 64;
    tok_chunk = 64;
    // Few rows (e.g. a KV projection) would leave threads idle: split tokens finer instead.
    if (ceil_div(nrows, row_chunk) * ceil_div(n_tokens, tok_chunk) < nthreads * 4)
      tok_chunk = std::max<int64_t>(4, ceil_div(ceil_div(n_tokens, nthreads * 4), 4) * 4);
  }
  // Panels take 8 rows at a time and leave a chunk's remainder to tiles: chunks of whole panels keep
  // every row on the same kernel whatever the token count.
  if (path == KernelPath::kPanels) row_chunk = ceil_div(row_chunk, 8) * 8;
  const int64_t n_row_chunks = ceil_div(nrows, row_chunk);
  const int64_t n_tasks = n_row_chunks * ceil_div(n_tokens, tok_chunk);
  const auto* wbase = static_cast<const uint8_t*>(w.data);
  pool.parallel_for(n_tasks, 1, [&](int64_t b, int64_t e) {
    for (int64_t task = b; task < e; ++task) {
      const int64_t rb = (task % n_row_chunks) * row_chunk;
      const int64_t tb = t_begin + (task / n_row_chunks) * tok_chunk;
      const int64_t rn = std::min(row_chunk, nrows - rb);
      const int64_t te = std::min(t_end, tb + tok_chunk);
      kernel(wbase + size_t(r0 + rb) * w.row_bytes, w.row_bytes, rn, acts, tb, te, y + tb * nrows + rb, nrows,
             path);
    }
  });
}

}  // namespace

void matmul_rows(const WeightView& w, const float* x, int64_t n_tokens, int64_t r0, int64_t r1, float* y,
                 ThreadPool& pool, int64_t n_tile_tokens) {
  AGENTKV_CHECK(is_matmul_type(w.type));
  AGENTKV_CHECK(0 <= r0 && r0 <= r1 && r1 <= w.rows && n_tokens >= 0);
  AGENTKV_CHECK(w.row_bytes >= type_row_bytes(w.type, w.cols));
  AGENTKV_CHECK(n_tile_tokens <= n_tokens);
  const int64_t nrows = r1 - r0;
  if (nrows == 0 || n_tokens == 0) return;
  const MatmulKernel kernel = pick_kernel(w.type);

  // One buffer per calling thread, reused across calls so steady-state decode does not allocate.
  // Lambdas below name `acts`, a real reference: naming the thread_local there would resolve to the
  // worker thread's own (empty) instance.
  thread_local ActBuffer tls_acts;
  ActBuffer& acts = tls_acts;
  acts.reset(act_kind_for(w.type), w.cols, n_tokens);
  if (n_tokens >= 4 && pool.size() > 1) {
    pool.parallel_for(n_tokens, 2, [&](int64_t b, int64_t e) {
      for (int64_t t = b; t < e; ++t) quantize_act_row(x + t * w.cols, acts, t);
    });
  } else {
    for (int64_t t = 0; t < n_tokens; ++t) quantize_act_row(x + t * w.cols, acts, t);
  }
  if (n_tile_tokens < 0) {
    run_token_range(kernel, KernelPath::kAuto, w, acts, r0, nrows, 0, n_tokens, y, pool);
  } else {
    run_token_range(kernel, KernelPath::kTiles, w, acts, r0, nrows, 0, n_tile_tokens, y, pool);
    run_token_range(kernel, KernelPath::kPanels, w, acts, r0, nrows, n_tile_tokens, n_tokens, y, pool);
  }
}

void matmul(const WeightView& w, const float* x, int64_t n_tokens, float* y, ThreadPool& pool,
            int64_t n_tile_tokens) {
  matmul_rows(w, x, n_tokens, 0, w.rows, y, pool, n_tile_tokens);
}

}  // namespace agentkv
