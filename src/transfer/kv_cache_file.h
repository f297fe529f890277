// A model's cache for a context as a file, so a transfer can cross processes: the sender writes
// the K/V of its sequence, the receiver's process loads it into the sender model's KV manager and
// transfers from there. GGUF (general.architecture = "agentkv-kvcache") with the model's
// fingerprint and geometry, the token ids, the text, per layer K (as stored, after RoPE at
// positions 0..n-1) and V in the arena's f16, and a checksum over every byte of the file (format
// version 2; version 1's left the metadata out, so an edited fingerprint passed).
#pragma once

#include <string>
#include <string_view>

#include "kv/kv_manager.h"
#include "model/loaded_model.h"
#include "util/status.h"

namespace agentkv {

// `seq` (in `kv`, of model `lm`) must hold exactly lm's tokenization of `text`.
Status save_kv_cache_file(const std::string& path, const LoadedModel& lm, const KvManager& kv, const KvSequence& seq,
                          std::string_view text);

// Refuses, with one line naming the problem, a file that is not a cache file, is damaged
// (checksum), was written by another model (fingerprint; the message names both), or whose tokens
// are not lm's tokenization of its text. On success `seq` (empty, in `kv`) holds the tokens and
// their K/V exactly as written; returns the text.
Result<std::string> load_kv_cache_file(const std::string& path, const LoadedModel& lm, KvManager& kv, KvSequence& seq);

}  // namespace agentkv
