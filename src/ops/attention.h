// Attention that reads K/V in place through a sequence's block table (paged KV): no gather into a
// contiguous copy. One call handles one query token and one query head.
#pragma once

#include <cstdint>

namespace agentkv {

// Where one layer's K and V live inside the KV arena. A block holds block_size token slots; within a
// block, this layer's K is [block_size][kv_dim] floats and V follows at v_offset.
struct PagedKvLayer {
  float* base = nullptr;       // this layer's K of block 0
  int64_t block_stride = 0;    // floats from one block to the next
  int64_t v_offset = 0;        // floats from a block's K to its V (same layer)
  int block_size = 0;
  int kv_dim = 0;              // n_kv_heads * head_dim

  float* k(int32_t block, int slot_in_block) const {
    return base + int64_t(block) * block_stride + int64_t(slot_in_block) * kv_dim;
  }
  float* v(int32_t block, int slot_in_block) const { return k(block, slot_in_block) + v_offset; }
};

// The one place K/V precision is decided: llama.cpp keeps its KV cache in f16 (its default type_k /
// type_v), so the values we store are rounded through binary16 here. Storage stays f32.
void kv_store_fp16_rounded(float* dst, const float* src, int n);

// out[head_dim] = softmax_j(scale * q·K_j) · V_j over slots j in [lo, hi] of the sequence whose
// block table is given, for KV head kv_head. scratch must hold hi - lo + 1 floats. Mirrors ggml's
// non-flash attention with an f16 cache: q is rounded to f16 for the K dot (the K·q mul_mat converts
// q to the cache's type), and the softmax weights are rounded to f16 before weighting V (the V·p
// mul_mat converts p likewise); sums are in f32.
void attend_head(const float* q, const PagedKvLayer& kv, const int32_t* block_table, int64_t lo,
                 int64_t hi, int kv_head, int head_dim, float scale, float* out, float* scratch);

}  // namespace agentkv
