// The budget checks against the machine: -t above the hardware threads this process may use and
// --kv-mem above RAM or the cgroup limit are refused with both numbers named; what fits passes.
#include <gtest/gtest.h>

#include <string>

#include "util/machine.h"

namespace agentkv {
namespace {

TEST(Machine, KnowsItsThreadsAndMemory) {
  EXPECT_GE(usable_hardware_threads(), 1);
  const auto mem = machine_memory_limit();
  ASSERT_TRUE(mem.has_value());
  EXPECT_GT(mem->bytes, int64_t(16) << 20);
  EXPECT_FALSE(mem->source.empty());
}

TEST(Machine, RefusesMoreThreadsThanTheMachineHas) {
  const int n = usable_hardware_threads();
  EXPECT_TRUE(check_thread_count("-t", 0).ok());
  EXPECT_TRUE(check_thread_count("-t", n).ok());
  const Status st = check_thread_count("-t", 100000);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().find("-t 100000"), std::string::npos) << st.error();
  EXPECT_NE(st.error().find(std::to_string(n) + " hardware threads"), std::string::npos) << st.error();
  EXPECT_FALSE(check_thread_count("-t", n + 1).ok());
}

TEST(Machine, RefusesAMemoryBudgetTheMachineCannotHold) {
  const auto mem = machine_memory_limit();
  ASSERT_TRUE(mem.has_value());
  EXPECT_TRUE(check_memory_budget("--kv-mem", 1 << 20).ok());
  EXPECT_TRUE(check_memory_budget("--kv-mem", mem->bytes).ok());
  const Status st = check_memory_budget("--kv-mem", mem->bytes + 1);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), ErrorCode::kResourceExhausted);
  EXPECT_NE(st.error().find("--kv-mem"), std::string::npos) << st.error();
  EXPECT_NE(st.error().find(std::to_string(mem->bytes + 1) + " bytes"), std::string::npos) << st.error();
  EXPECT_NE(st.error().find(std::to_string(mem->bytes) + " bytes"), std::string::npos) << st.error();
}

TEST(Machine, FormatsBytes) {
  EXPECT_EQ(format_bytes(512), "512 B");
  EXPECT_EQ(format_bytes(int64_t(3) << 29), "1.5 GiB");
  EXPECT_EQ(format_bytes(int64_t(100) << 30), "100.0 GiB");
}

}  // namespace
}  // namespace agentkv
