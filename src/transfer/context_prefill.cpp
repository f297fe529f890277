#include "transfer/context_prefill.h"

#include <algorithm>
#include <vector>

#include "transfer/layer_kv.h"

namespace agentkv {

Result<std::unique_ptr<KvManager>> private_kv_manager(const LoadedModel& lm, int64_t n_slots, int block_size) {
  KvManagerOptions o;
  o.block_size = block_size;
  o.prefix_caching = false;
  o.mem_bytes = KvArena::bytes_per_block(lm.config(), block_size) * (n_slots / block_size + 8);
  return KvManager::create(lm.config(), lm.fingerprint, o);
}

Status prefill_sequence(const LoadedModel& lm, const KvManager& kv, KvSequence& seq, std::span<const int32_t> tokens,
                        ThreadPool& pool) {
  const int64_t first = seq.n_tokens();
  if (!seq.reserve(int64_t(tokens.size()))) return make_error("prefill: KV budget too small");
  AGENTKV_TRY(prefill_slots(*lm.model, kv.arena(), seq.blocks(), tokens, first, pool));
  seq.commit(tokens);
  return Status::ok_status();
}

Result<std::string> greedy_continuation(const LoadedModel& lm, const KvSequence& ctx, std::span<const int32_t> prompt,
                                        int n_new, ThreadPool& pool,
                                        const std::function<bool(const std::string&)>& done) {
  if (prompt.empty()) return make_error("greedy continuation: empty prompt");
  KvSequence seq = ctx.fork();
  if (!seq.reserve(int64_t(prompt.size()) + n_new)) return make_error("greedy continuation: KV budget too small");
  std::vector<float> logits(size_t(lm.config().n_vocab));
  const KvArena& arena = seq.manager().arena();
  int64_t pos = seq.n_tokens();
  AGENTKV_TRY(prefill_slots(*lm.model, arena, seq.blocks(), prompt, pos, pool, logits.data()));
  pos += int64_t(prompt.size());
  std::vector<int32_t> out;
  for (int i = 0; i < n_new; ++i) {
    const int32_t tok = int32_t(std::max_element(logits.begin(), logits.end()) - logits.begin());
    out.push_back(tok);
    if (i + 1 == n_new || (done && done(lm.tokenizer->decode(out)))) break;
    AGENTKV_TRY(prefill_slots(*lm.model, arena, seq.blocks(), std::span<const int32_t>(&tok, 1), pos, pool, logits.data(),
                              /*decode kernels*/ -1));
    ++pos;
  }
  return lm.tokenizer->decode(out);
}

}  // namespace agentkv
