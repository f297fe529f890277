// A hand-made tiny model geometry for KV tests that need no model: two layers, kv_dim 4 (one KV head
// of 4), so a block of 4 tokens is 2 layers * (K + V) * 4 slots * 4 values * 2 bytes = 128 bytes.
#pragma once

#include "model/model_config.h"

namespace agentkv::testing_kv {

inline ModelConfig tiny_config() {
  ModelConfig c;
  c.arch = "test";
  c.n_layer = 2;
  c.n_head = 2;
  c.n_head_kv = 1;
  c.head_dim = 4;
  return c;
}
inline constexpr int64_t kTinyBlockBytes4 = 2 * 2 * 4 * 4 * 2;  // per block of 4 tokens

}  // namespace agentkv::testing_kv
