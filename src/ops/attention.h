// Attention that reads K/V in place through a sequence's block table (paged KV): no gather into a
// contiguous copy. One call handles one query token and all query heads that share one KV head.
#pragma once

#include <cstdint>

namespace agentkv {

// K/V are stored as IEEE binary16, as llama.cpp's default cache does: half the memory of f32, and
// our logits track llama.cpp's because the same values are rounded the same way.
using kv_t = uint16_t;

// Where one layer's K and V live inside the KV arena. A block holds block_size token slots; within a
// block, this layer's K is [block_size][kv_dim] values and V follows at v_offset.
struct PagedKvLayer {
  kv_t* base = nullptr;        // this layer's K of block 0
  int64_t block_stride = 0;    // values from one block to the next
  int64_t v_offset = 0;        // values from a block's K to its V (same layer)
  int block_size = 0;
  int kv_dim = 0;              // n_kv_heads * head_dim

  kv_t* k(int32_t block, int slot_in_block) const {
    return base + int64_t(block) * block_stride + int64_t(slot_in_block) * kv_dim;
  }
  kv_t* v(int32_t block, int slot_in_block) const { return k(block, slot_in_block) + v_offset; }
};

// Converts n floats to the cache's f16 (round to nearest even).
void kv_store(kv_t* dst, const float* src, int n);
// And back, e.g. to re-rotate or inspect cached K.
void kv_load(float* dst, const kv_t* src, int n);

// For each of the n_q query heads q[h*head_dim ..] (all mapped to KV head kv_head):
// out[h*head_dim ..] = softmax_j(scale * q_h·K_j) · V_j over slots j in [lo, hi] of the sequence
// whose block table is given. scratch must hold n_q * (hi - lo + 1) floats.
// Mirrors ggml's non-flash attention with an f16 cache: q is rounded to f16 for the K dot (the K·q
// mul_mat converts q to the cache type), the softmax weights are rounded to f16 before weighting V;
// sums are in f32. softcap > 0 (Gemma 2): each scaled score s becomes softcap * tanh(s / softcap) before
// the softmax, as llama.cpp applies f_attn_logit_softcapping.
void attend_group(const float* q, int n_q, const PagedKvLayer& kv, const int32_t* block_table, int64_t lo,
                  int64_t hi, int kv_head, int head_dim, float scale, float* out, float* scratch,
                  float softcap = 0.0f);

// x[i] = softcap * tanh(x[i] / softcap) for i < n (llama.cpp's scale, tanh, scale).
void apply_softcap(float* x, int64_t n, float softcap);

}  // namespace agentkv
