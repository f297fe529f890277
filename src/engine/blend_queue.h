// The KV collector across requests (issue 14, deliverable 2): chat requests that reach a shared
// segment in the same engine step are blended together, one collective step per (master, segment,
// R): one batched pass to the check layer and one over every request's selected tokens
// (share/kv_collector.h), as a round's agents are. Requests add their blend while the step's
// completions are handed out; the engine flushes the queue once that step's deferred work is done.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "kv/kv_manager.h"
#include "model/model.h"
#include "share/kv_collector.h"
#include "util/thread_pool.h"

namespace agentkv {

struct PendingBlend {
  std::shared_ptr<const KvSequence> master;   // held while queued: eviction cannot free it
  bool master_is_copy = false;                // a copy made for this blend (an expansion), held by no one else
  int32_t master_start = 0;                   // the segment's first slot (and RoPE position) in the master
  std::vector<int32_t> tokens;                // the segment run
  std::shared_ptr<const KvSequence> prefix;   // the request's context before the run
  RecomputeOptions options;
  std::function<void(Result<BlendedCopy>)> done;  // runs on the engine thread, in the flush
};

class BlendQueue {
 public:
  void add(PendingBlend b) { pending_.push_back(std::move(b)); }
  bool empty() const { return pending_.empty(); }
  // Runs every queued blend, grouped; each callback gets its copy or the group's error. `reclaim`
  // frees cached contexts when the pool cannot hold a group's copies (false: nothing left to free).
  // Returns the number of collective steps (groups) it ran.
  size_t flush(const Model& model, KvManager& kv, ThreadPool& pool, const std::function<bool()>& reclaim);
  // Each sequence the queue holds while blends wait or are handed out: the requests' prefixes, masters
  // copied for a blend, and copies made but not yet handed over (callbacks run one at a time, and one
  // may admit a request meanwhile). They are work in flight, not an agent's pin (Engine::kv_budget);
  // a sequence may be visited more than once.
  void for_each_held(const std::function<void(const KvSequence&)>& fn) const;

 private:
  // A flush under way (a callback may flush again: a stack): its blends and the current group's
  // copies, of which those from `next_copy` on are not handed over yet.
  struct Flushing {
    const std::vector<PendingBlend>* work = nullptr;
    const std::vector<BlendedCopy>* copies = nullptr;
    size_t next_copy = 0;
  };
  std::vector<PendingBlend> pending_;
  std::vector<Flushing> flushing_;
};

}  // namespace agentkv
