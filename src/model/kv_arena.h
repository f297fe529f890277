// The memory that holds K and V for every cached token, in fixed-size blocks. The model layer owns
// the layout (it depends on the architecture's geometry); the KV manager decides which blocks belong
// to which sequence. Block layout: [layer][K | V][block_size][kv_dim] f16 values (kv_t). K is stored
// after RoPE.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "model/model_config.h"
#include "ops/attention.h"

namespace agentkv {

class KvArena {
 public:
  // Bumped whenever the block layout above changes: stored blocks (kv/tier_record.h) carry it, so a
  // block written under another layout is refused, not misread.
  static constexpr uint32_t kLayoutVersion = 1;

  // Reserves the memory lazily (anonymous mmap, no swap reservation): pages are touched only when a
  // block is first written, so a budget of many GB costs nothing up front. If the mapping fails the
  // arena is not valid() and must not be used.
  KvArena(const ModelConfig& cfg, int block_size, int64_t n_blocks);

  bool valid() const { return data_ != nullptr; }

  int block_size() const { return block_size_; }
  int64_t n_blocks() const { return n_blocks_; }
  int n_layer() const { return n_layer_; }
  int kv_dim() const { return kv_dim_; }
  int head_dim() const { return head_dim_; }
  int64_t block_values() const { return block_stride_; }
  int64_t bytes_per_block() const { return block_stride_ * int64_t(sizeof(kv_t)); }
  static int64_t bytes_per_block(const ModelConfig& cfg, int block_size) {
    return int64_t(cfg.n_layer) * 2 * block_size * cfg.kv_dim() * int64_t(sizeof(kv_t));
  }

  PagedKvLayer layer(int il) const {
    PagedKvLayer l;
    l.base = data_.get() + int64_t(il) * 2 * block_size_ * kv_dim_;
    l.block_stride = block_stride_;
    l.v_offset = int64_t(block_size_) * kv_dim_;
    l.block_size = block_size_;
    l.kv_dim = kv_dim_;
    return l;
  }
  kv_t* block_data(int32_t block) const { return data_.get() + int64_t(block) * block_stride_; }

 private:
  int block_size_;
  int64_t n_blocks_;
  int n_layer_;
  int kv_dim_;
  int head_dim_;
  int64_t block_stride_;
  struct Unmap {
    size_t bytes;
    void operator()(kv_t* p) const;
  };
  std::unique_ptr<kv_t[], Unmap> data_;
};

}  // namespace agentkv
