// Greedy decoding's pick over a vocabulary of logits (Gemma 3's is 262,144 wide, once per generated
// token): the index of the largest value, the lowest index among ties, exactly as
// std::max_element(logits, logits + n) answers it, NaNs included.
#pragma once

#include <cstdint>

namespace agentkv {

// n >= 1.
int32_t argmax(const float* logits, int64_t n);

}  // namespace agentkv
