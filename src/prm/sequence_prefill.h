// Appending tokens to KvSequences with the prefill kernels: the one way the PRM code writes K/V.
// Batch-invariant mode with every token in the packed-panel group, so a token's K/V and logits do
// not depend on the chunking or on the other tokens of the pass. The KV-PRM's contexts and the
// text PRM's re-encoded trajectories both come from here, which is what lets their scores agree bit
// for bit.
#pragma once

#include <span>
#include <vector>

#include "kv/kv_manager.h"
#include "model/model.h"

namespace agentkv::prm {

// Appends tokens[i] to *seqs[i] for every i in ONE forward pass (each pass repacks the weight
// panels, so few large passes beat many small ones) and commits them. With last_logits, returns the
// logits of each sequence's last new token, in order (seqs.size() * n_vocab floats). Sequences with
// no tokens are left alone (and get no logits row).
Status prefill_together(const Model& model, KvManager& kv, std::span<KvSequence* const> seqs,
                        std::span<const std::span<const int32_t>> tokens, ThreadPool& pool,
                        std::vector<float>* last_logits = nullptr);

// One sequence, in chunks of at most `chunk` tokens (activations scale with the pass).
Status prefill_sequence(const Model& model, KvManager& kv, KvSequence& seq, std::span<const int32_t> tokens,
                        ThreadPool& pool, std::vector<float>* last_logits = nullptr, int chunk = 512);

}  // namespace agentkv::prm
