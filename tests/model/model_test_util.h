// Shared helpers of the tests that run the real models (CTest label `model`).
#pragma once

#include <gtest/gtest.h>

#include <fstream>
#include <memory>
#include <sstream>
#include <string>

#include "model/loaded_model.h"
#include "util/thread_pool.h"

namespace agentkv::testing {

inline std::string source_path(const std::string& rel) { return std::string(AGENTKV_SOURCE_DIR) + "/" + rel; }

inline std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// Loads a model alias once per test binary; fails the test (not skips) when it is missing, since
// the README's set-up fetches both models before the tests run.
inline const LoadedModel& real_model(const std::string& alias) {
  static std::unique_ptr<LoadedModel> cache[2];
  const int slot = alias == "smollm2" ? 0 : 1;
  if (!cache[slot]) {
    auto lm = load_model(alias);
    if (!lm.ok()) {
      ADD_FAILURE() << lm.error();
      std::abort();
    }
    cache[slot] = std::move(*lm);
  }
  return *cache[slot];
}

// One pool of the default size per test binary, for tests that need no pool of their own.
inline ThreadPool& test_pool() {
  static ThreadPool pool(0);
  return pool;
}

}  // namespace agentkv::testing
