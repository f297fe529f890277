#include "model/kv_arena.h"

#include <sys/mman.h>

#include <limits>

#include "util/status.h"

namespace agentkv {

void KvArena::Unmap::operator()(kv_t* p) const {
  if (p) munmap(p, bytes);
}

KvArena::KvArena(const ModelConfig& cfg, int block_size, int64_t n_blocks)
    : block_size_(block_size),
      n_blocks_(n_blocks),
      n_layer_(cfg.n_layer),
      kv_dim_(cfg.kv_dim()),
      head_dim_(cfg.head_dim),
      block_stride_(int64_t(cfg.n_layer) * 2 * block_size * cfg.kv_dim()) {
  AGENTKV_CHECK(block_size > 0 && n_blocks > 0 && block_stride_ > 0);
  AGENTKV_CHECK(uint64_t(n_blocks) <= std::numeric_limits<size_t>::max() / uint64_t(bytes_per_block()));
  const size_t bytes = size_t(n_blocks) * size_t(bytes_per_block());
  // Anonymous pages read as zero: a slot never written is never read (masks stop at the written
  // length), but zeroes keep sanitizers and debuggers quiet about it. NORESERVE: a budget larger
  // than what is ever used must not count against overcommit limits.
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p != MAP_FAILED) data_ = std::unique_ptr<kv_t[], Unmap>(static_cast<kv_t*>(p), Unmap{bytes});
}

}  // namespace agentkv
