#include "transfer/kv_transfer.h"

#include <algorithm>

#include "transfer/layer_kv.h"
#include "transfer/paired_features.h"
#include "transfer/token_alignment.h"

namespace agentkv {

Result<KvTransferReport> transfer_kv_cache(const TransferMap& map, const LoadedModel& sender, const KvManager& sender_kv,
                                           const KvSequence& sender_seq, const LoadedModel& receiver,
                                           KvManager& receiver_kv, KvSequence& receiver_seq, std::string_view text,
                                           ThreadPool& pool, const KvTransferOptions& opt) {
  AGENTKV_TRY(check_transfer_pair(map, sender, receiver));
  if (sender_kv.pool().fingerprint() != sender.fingerprint)
    return make_error("kv transfer: the sender cache was made by another model than " + sender.name);
  if (receiver_kv.pool().fingerprint() != receiver.fingerprint)
    return make_error("kv transfer: the receiver cache manager belongs to another model than " + receiver.name);
  if (receiver_seq.n_tokens() != 0) return make_error("kv transfer: the receiver sequence must be empty");
  TokenSpans s, r;
  AGENTKV_ASSIGN_OR_RETURN(s, tokenize_with_spans(*sender.tokenizer, text, sender.tokenizer->add_bos_default()));
  AGENTKV_ASSIGN_OR_RETURN(r, tokenize_with_spans(*receiver.tokenizer, text, receiver.tokenizer->add_bos_default()));
  if (sender_seq.tokens() != s.tokens)
    return make_error("kv transfer: the sender cache holds " + std::to_string(sender_seq.n_tokens()) +
                      " tokens that are not the sender's tokenization of the text (" + std::to_string(s.size()) + " tokens)");
  const TokenAlignment align = align_tokens(r, s);
  const int64_t nr = int64_t(r.size());
  // Receiver tokens without sender text (empty spans) cannot be projected: compute them natively,
  // as the prefix (BOS only sits at the front).
  int64_t n_native = std::min<int64_t>(nr, std::max(0, opt.native_prefix));
  while (n_native < nr && align.count[size_t(n_native)] == 0) ++n_native;
  for (int64_t t = n_native; t < nr; ++t)
    if (align.count[size_t(t)] == 0) return make_error("kv transfer: receiver token without aligned sender text");

  if (!receiver_seq.reserve(nr)) return make_error("kv transfer: receiver KV budget too small for " + std::to_string(nr) + " tokens");
  const std::vector<int32_t>& table = receiver_seq.blocks();
  AGENTKV_TRY(prefill_slots(*receiver.model, receiver_kv.arena(), table,
                            std::span<const int32_t>(r.tokens.data(), size_t(n_native)), 0, pool));

  const std::vector<LayerKv> skv =
      read_unrotated_kv(sender.config(), sender_kv.arena(), sender_seq.blocks(), sender_seq.n_tokens());
  const ModelConfig& rc = receiver.config();
  const int rd = rc.kv_dim();
  // Tiles of tokens, so each layer's weights stream through the cache once per tile.
  constexpr int64_t kTile = 16;
  const int in_dim = map.in_dim(), out_dim = map.out_dim();
  pool.run([&](int ti, int nt) {
    std::vector<float> x(size_t(kTile * in_dim)), y(size_t(kTile * out_dim));
    std::vector<float> k(size_t(kTile * rc.n_layer * rd)), v(k.size());
    for (int64_t t0 = n_native + ti * kTile; t0 < nr; t0 += nt * kTile) {
      const int n = int(std::min(kTile, nr - t0));
      for (int l = 0; l < rc.n_layer; ++l) {
        const LayerKv& sl = skv[size_t(map.sender_layer[size_t(l)])];
        for (int r = 0; r < n; ++r) pooled_sender_features(sl, align, size_t(t0 + r), x.data() + int64_t(r) * in_dim);
        map.project_rows(l, x.data(), n, y.data());
        for (int r = 0; r < n; ++r) {
          const float* yr = y.data() + int64_t(r) * out_dim;
          float* kr = k.data() + (int64_t(r) * rc.n_layer + l) * rd;
          float* vr = v.data() + (int64_t(r) * rc.n_layer + l) * rd;
          std::copy(yr, yr + rd, kr);
          std::copy(yr + rd, yr + out_dim, vr);
        }
      }
      for (int r = 0; r < n; ++r) {
        const int64_t off = int64_t(r) * rc.n_layer * rd;
        write_rotated_kv(rc, receiver_kv.arena(), table, t0 + r, t0 + r, k.data() + off, v.data() + off);
      }
    }
  });
  const int64_t n_suffix = std::min<int64_t>(nr - n_native, std::max(0, opt.native_suffix));
  if (n_suffix > 0)
    AGENTKV_TRY(prefill_slots(*receiver.model, receiver_kv.arena(), table,
                              std::span<const int32_t>(r.tokens.data() + (nr - n_suffix), size_t(n_suffix)), nr - n_suffix,
                              pool));
  receiver_seq.mark_approximate_from(n_native);
  receiver_seq.commit(r.tokens);

  KvTransferReport rep;
  rep.n_sender_tokens = int64_t(s.size());
  rep.n_receiver_tokens = nr;
  rep.n_native = n_native + n_suffix;
  rep.n_projected = nr - n_native - n_suffix;
  return rep;
}

}  // namespace agentkv
