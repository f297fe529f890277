#include "model/kv_arena.h"

#include "util/status.h"

namespace agentkv {

KvArena::KvArena(const ModelConfig& cfg, int block_size, int64_t n_blocks)
    : block_size_(block_size),
      n_blocks_(n_blocks),
      n_layer_(cfg.n_layer),
      kv_dim_(cfg.kv_dim()),
      block_stride_(int64_t(cfg.n_layer) * 2 * block_size * cfg.kv_dim()) {
  AGENTKV_CHECK(block_size > 0 && n_blocks > 0);
  // Zeroed: a slot never written is never read (masks stop at the written length), but zeroes
  // keep sanitizers and debuggers quiet about it.
  data_ = std::make_unique<kv_t[]>(size_t(n_blocks) * size_t(block_stride_));
}

}  // namespace agentkv
