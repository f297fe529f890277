// A policy's solution as token runs, one per line, and the per-step KV contexts the KV-PRM reads:
// the state of the policy's cache right after each step's newline.
#pragma once

#include <span>
#include <string_view>
#include <vector>

#include "kv/kv_manager.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace agentkv::prm {

// Cuts generated tokens after every token whose text contains a newline (the policy writes one step
// per line). A last run without a newline is kept. Each run's text is decode(run).
std::vector<std::vector<int32_t>> split_lines(const Tokenizer& tok, std::span<const int32_t> generated);

// Encodes text line by line ("line\n" each, no BOS), for trajectories given as text.
std::vector<std::vector<int32_t>> encode_lines(const Tokenizer& tok, std::string_view text);

// prompt + lines[0..n) as one token list: what the text PRM re-encodes for the step ending line n-1.
std::vector<int32_t> concat_prefix(std::span<const int32_t> prompt, std::span<const std::vector<int32_t>> lines,
                                   size_t n);

// For each trajectory (its lines), forks its start context starts[t] (sharing its blocks), appends
// the lines and keeps a fork after each: result[t][k] holds the start and lines 0..k of trajectory t. Line k of
// every trajectory is written in one forward pass. Consecutive contexts of a trajectory share all
// blocks but the partial last one.
Result<std::vector<std::vector<KvSequence>>> line_contexts(
    const Model& model, KvManager& kv, std::span<const KvSequence* const> starts,
    std::span<const std::span<const std::vector<int32_t>>> trajectories, ThreadPool& pool);

}  // namespace agentkv::prm
