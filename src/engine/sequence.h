// One sequence the engine is generating: its tokens (prompt + generated), its KV blocks and its
// per-sequence sampling and text state. A request with n > 1 owns n of them after the fork.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "engine/sampler.h"
#include "engine/text_stream.h"
#include "kv/kv_manager.h"
#include "share/master_diff.h"
#include "share/master_diff_attention.h"

namespace agentkv {

struct Sequence {
  enum class State { kWaiting, kRunning, kFinished };

  Sequence(KvManager& kv_manager, uint64_t salt) : kv(kv_manager, salt) {}

  uint64_t request_id = 0;
  int index = 0;                 // 0..n-1 within the request
  uint64_t arrival = 0;          // request arrival order: later arrivals are preempted first
  bool scheduled = false;        // picked in the step being built
  State state = State::kWaiting;
  KvSequence kv;                 // tokens whose K/V is computed, and their blocks
  std::shared_ptr<const KvSequence> resume;  // a retained snapshot to start from (RequestParams::kv_from)
  // A compact snapshot resumed in attention (EngineOptions::resume_in_attention): `resume` is its
  // sequence with holes, these its diffs. Once resumed, `diffs` are those standing for holes of `kv`,
  // and `attention` reads them (made when the sequence is first batched); both empty otherwise.
  std::vector<PlacedSegmentDiff> resume_diffs;
  std::vector<PlacedSegmentDiff> diffs;
  std::unique_ptr<MasterDiffAttention> attention;
  std::vector<int32_t> tokens;   // prompt + generated; kv catches up with it
  int n_prompt = 0;
  int n_generated = 0;
  int n_cached_prompt = -1;      // prefix-cache hit of the first admission (-1: not admitted yet)
  int n_preemptions = 0;
  std::unique_ptr<Sampler> sampler;
  std::unique_ptr<TextStream> text;
  double last_token_time = 0;

  int64_t n_uncomputed() const { return int64_t(tokens.size()) - kv.n_tokens(); }
  // With kv given back (preempted, finished): nothing of it is read through diffs any more.
  void forget_diffs() {
    diffs.clear();
    attention.reset();
  }
};

}  // namespace agentkv
