// 32 sequences' decode through the batched path equals one at a time, bit for bit, on both real
// models (the check: batched_decode_check.h).
#include "batched_decode_check.h"
#include "model_test_util.h"

namespace agentkv {
namespace {

TEST(BatchedDecode, Smollm2ThirtyTwoSequencesEqualOneAtATimeBitForBit) {
  testing::check_batched_decode(testing::real_model("smollm2"), "smollm2");
}
TEST(BatchedDecode, Gemma3ThirtyTwoSequencesEqualOneAtATimeBitForBit) {
  testing::check_batched_decode(testing::real_model("gemma3"), "gemma3");
}

}  // namespace
}  // namespace agentkv
