// Which tokens of a shared segment an agent recomputes (CacheBlend's "high KV deviation" tokens):
// the first few tokens of the segment, plus a fraction of the others chosen by the deviation of
// their reused K/V from freshly computed K/V at a check layer.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace agentkv {

// Indices into the segment, ascending: [0, min(n_first, n)) and the last n_last tokens, plus the
// ceil(ratio * n) tokens with the largest deviation among the others (ties to the lower index, so
// the choice is deterministic), capped at n. ratio = 1 selects every token; ratio = 0 only the
// first and last ones. ratio must be in [0, 1]; the deviation of a first or last token is not read.
std::vector<int32_t> select_tokens(std::span<const float> deviation, double ratio, int n_first, int n_last = 0);

}  // namespace agentkv
