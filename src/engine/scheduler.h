// Picks the work of one engine step under a token budget (vLLM v1 style: every sequence's computed
// tokens catch up with its tokens; decode tokens and chunks of several prefills share one batch).
// Decode tokens go first (they are latency bound), then unfinished prefills, then new admissions.
// When blocks run out, the most recently arrived running sequence is preempted: its blocks are
// released (they stay in the prefix cache until evicted) and it is recomputed later.
// No model here: the scheduler only asks the KV manager for blocks, so it is tested without one.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <vector>

#include "engine/sequence.h"
#include "kv/kv_manager.h"

namespace agentkv {

struct SchedulerOptions {
  int max_batch_tokens = 512;  // tokens per forward pass
  int max_running = 256;       // sequences per forward pass
};

struct ScheduledChunk {
  Sequence* seq = nullptr;
  int64_t start = 0;           // first slot / position computed this step
  int64_t n = 0;               // tokens computed this step
  bool wants_logits = false;   // the chunk reaches the sequence's last token: sample after it
};

struct ScheduleStats {
  uint64_t preemptions = 0;
  uint64_t prefix_query_tokens = 0;
  uint64_t prefix_hit_tokens = 0;
};

class Scheduler {
 public:
  Scheduler(KvManager& kv, SchedulerOptions opt);

  void add_waiting(Sequence* s);   // to the back of the queue
  void add_running(Sequence* s);   // a fork whose blocks are already shared
  // Removes a sequence from whichever queue holds it and releases its blocks at once.
  void remove(Sequence* s);

  std::vector<ScheduledChunk> schedule();
  // Frees blocks held outside the running sequences (the segment cache's contexts, least recently
  // used first) and says whether it dropped anything; tried before preempting a running sequence
  // or leaving a waiting one out for want of blocks.
  void set_reclaim(std::function<bool()> reclaim) { reclaim_ = std::move(reclaim); }

  size_t n_running() const { return running_.size(); }
  size_t n_waiting() const { return waiting_.size(); }
  const std::deque<Sequence*>& waiting() const { return waiting_; }
  const std::vector<Sequence*>& running() const { return running_; }
  const ScheduleStats& stats() const { return stats_; }

 private:
  void preempt(Sequence* s);
  // At admission: starts s from its retained snapshot when that shares a longer prefix with the
  // prompt than the prefix cache did. Returns the tokens reused (0: the snapshot was not used).
  int64_t resume_from_snapshot(Sequence* s);
  bool reserve_or_preempt(Sequence* s, int64_t n);
  // Reclaims until `blocks` are free or nothing is left to reclaim.
  bool reclaim_until_free(int64_t blocks);

  KvManager& kv_;
  SchedulerOptions opt_;
  std::vector<Sequence*> running_;
  std::deque<Sequence*> waiting_;
  ScheduleStats stats_;
  std::function<bool()> reclaim_;
};

}  // namespace agentkv
