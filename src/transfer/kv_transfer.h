// Prefill-free transfer: the receiver's cache for a context is built from the sender's cache of
// the same text instead of running the receiver over it. Per receiver token: pool the aligned
// sender tokens' un-rotated K/V, project with the map, rotate K with the receiver's RoPE at the
// receiver position, and write both into the receiver's blocks. Only the first native_prefix
// receiver tokens (BOS / the attention sink, context-free) are computed by the receiver itself.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <utility>
#include <vector>

#include "kv/kv_manager.h"
#include "model/loaded_model.h"
#include "transfer/token_alignment.h"
#include "transfer/transfer_map.h"
#include "util/thread_pool.h"

namespace agentkv {

struct KvTransferOptions {
  int native_prefix = 1;
  // Hybrid mode: after the transfer, the receiver recomputes its last native_suffix context tokens
  // itself (they attend to the transferred cache), trading prefill time for quality where it
  // matters most, next to the tokens to be generated.
  int native_suffix = 0;
  // The suffix as a share of the receiver's context: it recomputes at least ceil(native_suffix_share ×
  // context tokens) of its last tokens (so one setting keeps the same share of the work at 1k and 4k
  // tokens). 1: every token, i.e. native prefill.
  double native_suffix_share = 0;
  // Hybrid by deviation (CacheBlend's selective recompute applied to a transferred cache; the
  // receiver has the text, so it can check where the projection went wrong): check_layer >= 0 runs
  // every projected token through the receiver's layers [0, check_layer] itself (those layers are then
  // native K/V), and the recompute_ratio of them whose projected K deviates most from the native K at
  // check_layer through every later layer as well. -1: off (projected K/V at every layer).
  int check_layer = -1;
  double recompute_ratio = 0;
  // Hybrid by rarity: the receiver also recomputes, through every layer, the ceil(rare_share ×
  // context tokens) projected tokens its map saw least in its fitting text (rare_counts: a count per
  // receiver token id), each with rare_window tokens before it and rare_window_after after it. A linear
  // map carries a passage's gist but not its rare specifics (a name, a number, a planted key:
  // BENCHMARKS.md, "Passkey"), and a question finds one through the words before it ("the pass key
  // is ..."), whose projected K/V do not say what follows them; the token after it matters less. 4
  // before and 1 after recalled more planted keys at less work than 4 on either side, and kept about
  // the same value (BENCHMARKS.md, "Hybrid by rarity"). Ties go to the later token. Does not combine
  // with a check layer (dev:R) or a conditioned map. rare_max_tokens > 0 caps the count: a longer
  // context holds more ordinary text, not more planted specifics, so the budget need not grow with it.
  double rare_share = 0;
  int64_t rare_max_tokens = 0;
  int rare_window = 4;
  int rare_window_after = 1;  // -1: rare_window (symmetric)
  std::span<const uint32_t> rare_counts;
  // When set (n_vocab floats): the receiver's logits after the context's last token, which gives
  // the first generated token without another pass. Needs native_suffix >= 1 (that token is run).
  float* last_logits = nullptr;
};

struct KvTransferReport {
  int64_t n_sender_tokens = 0;
  int64_t n_receiver_tokens = 0;
  int64_t n_native = 0;     // receiver tokens computed by the receiver (prefix and suffix)
  int64_t n_suffix = 0;     // of those, the hybrid suffix (asked for, or past what the sender holds)
  int64_t n_projected = 0;  // receiver tokens of the transferred range (neither native prefix nor suffix)
  // Of those, the ones the receiver computed through all its layers: a hybrid by deviation projects,
  // checks and recomputes them; one by rarity runs them natively and never projects them.
  int64_t n_recomputed = 0;
  int check_layers = 0;     // receiver layers computed natively for every projected token
  // Wall time of the parts: tokenizing both sides and aligning; reading, pooling, projecting and
  // writing; the receiver's own runs (prefix, hybrid suffix).
  double align_s = 0, project_s = 0, native_s = 0;
};

// The hybrid by rarity's token count for a context of n receiver tokens: ceil(share × n), at most
// max_tokens when that is > 0 (KvTransferOptions::rare_max_tokens).
int64_t rare_budget(double share, int64_t max_tokens, int64_t n);

// The hybrid by rarity's choice among tokens [0, n): the `want` tokens with the smallest counts (ties to
// the token with more neighbours at least as rare within 2 tokens either side, then to the later), each
// widened by `before` tokens before it and `after` after it, as ascending disjoint [begin, end) runs.
// Every token id must index counts.
std::vector<std::pair<int64_t, int64_t>> rare_runs(std::span<const int32_t> tokens, std::span<const uint32_t> counts,
                                                   int64_t want, int before, int after);

// The share of the receiver's native prefill work (token × layer passes) a transfer did itself:
// native tokens through every layer, projected ones through the check layers, the recomputed ones
// through the rest. 1 is native prefill's cost; the projection's own cost is apart.
double native_work_share(const KvTransferReport& rep, int n_layer);

// `sender_seq` (in `sender_kv`) must hold exactly the sender's tokenization of `text` (with its
// default BOS); `receiver_seq` (in `receiver_kv`) must be empty and receives the receiver's
// tokenization of `text`, marked approximate past the native prefix (when anything was projected)
// so that it is never served as an exact prefix hit. Refuses a map of another pair and a cache of
// another model or text.
Result<KvTransferReport> transfer_kv_cache(const TransferMap& map, const LoadedModel& sender, const KvManager& sender_kv,
                                           const KvSequence& sender_seq, const LoadedModel& receiver,
                                           KvManager& receiver_kv, KvSequence& receiver_seq, std::string_view text,
                                           ThreadPool& pool, const KvTransferOptions& opt = {});

// The same for tokens the caller aligned: `s` and `r` span one common axis (equal text_bytes; e.g.
// transfer/chat_alignment.h's two renderings of a conversation). `sender_seq` holds exactly s's
// tokens, which may cover only the start of the axis (a context the sender has only in part): every
// receiver token that reaches past the sender's last byte is computed by the receiver, as part of the
// hybrid suffix. `receiver_seq` receives r's tokens.
Result<KvTransferReport> transfer_aligned_kv_cache(const TransferMap& map, const LoadedModel& sender,
                                                   const KvManager& sender_kv, const KvSequence& sender_seq,
                                                   const TokenSpans& s, const LoadedModel& receiver,
                                                   KvManager& receiver_kv, KvSequence& receiver_seq,
                                                   const TokenSpans& r, ThreadPool& pool,
                                                   const KvTransferOptions& opt = {});

}  // namespace agentkv
