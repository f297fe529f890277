// Helpers of the model tests for layer-range passes, re-rotation and selective recompute: one
// sequence per KvArena region laid out by hand, batches of token ranges, KV read-back and the
// quality measures (KL of next-token distributions, greedy agreement).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <string>
#include <tuple>
#include <vector>

#include "kv/kv_diff_codec.h"
#include "model/batch.h"
#include "model/kv_arena.h"
#include "model_test_util.h"
#include "ops/attention.h"

namespace agentkv::testing {

// A block table of consecutive arena blocks [first, first + n).
inline std::vector<int32_t> block_run(int32_t first, int32_t n) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  std::iota(t.begin(), t.end(), first);
  return t;
}

inline int32_t blocks_for(int64_t n_slots, int block_size) { return int32_t((n_slots + block_size - 1) / block_size); }

// Appends tokens[i] at position pos0 + i, slot slot0 + i of sequence seq; logits for the last one.
inline void add_range(Batch& b, const std::vector<int32_t>& tokens, int32_t pos0, int32_t seq, int32_t slot0,
                      bool last_logits) {
  for (size_t i = 0; i < tokens.size(); ++i)
    b.add(tokens[i], pos0 + int32_t(i), seq, slot0 + int32_t(i), last_logits && i + 1 == tokens.size());
}

// Batch-invariant (every token through the prefill kernels), so any batching gives the same bits.
inline Batch invariant_batch() {
  Batch b;
  b.n_tile_tokens = 0;
  return b;
}

// K (which = 0) or V (which = 1) of one slot of a sequence at layer il, as floats.
inline std::vector<float> read_kv_row(const KvArena& kv, const std::vector<int32_t>& table, int32_t slot, int il,
                                      int which) {
  const PagedKvLayer l = kv.layer(il);
  const int bs = kv.block_size();
  const kv_t* src = which == 0 ? l.k(table[slot / bs], slot % bs) : l.v(table[slot / bs], slot % bs);
  std::vector<float> out(size_t(kv.kv_dim()));
  kv_load(out.data(), src, kv.kv_dim());
  return out;
}

// True when every layer's K and V of slots [a0, a0 + n) of table a equal those of [b0, b0 + n) of
// table b bit for bit (the arenas may differ).
inline bool same_kv_bits(const KvArena& ka, const std::vector<int32_t>& ta, int32_t a0, const KvArena& kb,
                         const std::vector<int32_t>& tb, int32_t b0, int32_t n) {
  const int bs = ka.block_size();
  const size_t row = size_t(ka.kv_dim()) * sizeof(kv_t);
  for (int il = 0; il < ka.n_layer(); ++il) {
    const PagedKvLayer la = ka.layer(il), lb = kb.layer(il);
    for (int32_t i = 0; i < n; ++i) {
      const int32_t sa = a0 + i, sb = b0 + i;
      if (std::memcmp(la.k(ta[sa / bs], sa % bs), lb.k(tb[sb / bs], sb % bs), row) != 0) return false;
      if (std::memcmp(la.v(ta[sa / bs], sa % bs), lb.v(tb[sb / bs], sb % bs), row) != 0) return false;
    }
  }
  return true;
}

inline bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// KL(p || q) of the softmax distributions of two logit rows, in nats; p is the reference.
inline double kl_of_logits(const float* ref, const float* got, int n) {
  const float mr = *std::max_element(ref, ref + n), mg = *std::max_element(got, got + n);
  double zr = 0, zg = 0;
  for (int i = 0; i < n; ++i) {
    zr += std::exp(double(ref[i] - mr));
    zg += std::exp(double(got[i] - mg));
  }
  const double lzr = std::log(zr), lzg = std::log(zg);
  double kl = 0;
  for (int i = 0; i < n; ++i) {
    const double lp = double(ref[i] - mr) - lzr, lq = double(got[i] - mg) - lzg;
    kl += std::exp(lp) * (lp - lq);
  }
  return std::max(0.0, kl);
}

inline int argmax(const float* x, int n) { return int(std::max_element(x, x + n) - x); }

// Both real models × every diff format, each case named like "gemma3_int4".
inline auto both_models_every_format() {
  return ::testing::Combine(::testing::Values("smollm2", "gemma3"),
                            ::testing::Values(DiffFormat::kF16, DiffFormat::kInt8, DiffFormat::kInt4));
}
inline std::string model_format_name(const ::testing::TestParamInfo<std::tuple<std::string, DiffFormat>>& info) {
  return std::get<0>(info.param) + "_" + std::string(diff_format_name(std::get<1>(info.param)));
}

}  // namespace agentkv::testing
