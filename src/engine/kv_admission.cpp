// Admission before work (engine/kv_admission.h): the worst case of a request, the pinned blocks and
// the one fit check.
#include "engine/kv_admission.h"

#include <algorithm>

namespace agentkv {

namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

}  // namespace

int64_t worst_case_blocks(int64_t prompt_tokens, int64_t max_tokens, int n, int64_t n_ctx, int block_size) {
  const int64_t bs = block_size;
  const int64_t total = std::max(prompt_tokens, std::min(prompt_tokens + std::max<int64_t>(max_tokens, 0), n_ctx));
  const int64_t gen = total - prompt_tokens;
  return ceil_div(total, bs) + int64_t(std::max(n, 1) - 1) * (ceil_div(gen, bs) + 1);
}

Status check_kv_fit(const KvDemand& d, const KvBudget& b, const std::string& what) {
  const int64_t own = std::max<int64_t>(0, d.need_blocks - d.reused_blocks);
  const int64_t unpinned = std::max<int64_t>(0, b.total_blocks - b.pinned_blocks);
  if (own <= unpinned) return {};
  std::string msg = what + " needs up to " + std::to_string(own) + " KV blocks (" + std::to_string(d.tokens) +
                    " tokens in blocks of " + std::to_string(b.block_size) + (d.reused_blocks > 0 ? ", " +
                    std::to_string(d.reused_blocks) + " more shared with its resident context" : std::string()) +
                    ") but only " + std::to_string(unpinned) + " of the " + std::to_string(b.total_blocks) +
                    " blocks of the KV budget are free of pins (" + std::to_string(b.pinned_blocks) +
                    " held by retained agent contexts)";
  if (own > b.total_blocks)
    return make_error(ErrorCode::kResourceExhausted, msg + "; it can never fit: lower max_tokens or raise --kv-mem");
  return make_error(ErrorCode::kKvPinned, msg + "; retry once agents are deleted or expire, or lower max_tokens");
}

int64_t count_pinned_blocks(const BlockPool& pool, std::span<const int32_t> unpinned_refs) {
  int64_t pinned = 0;
  for (int64_t b = 0; b < pool.n_blocks(); ++b)
    if (pool.refcount(int32_t(b)) > unpinned_refs[size_t(b)]) ++pinned;
  return pinned;
}

}  // namespace agentkv
