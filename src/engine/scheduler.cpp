#include "engine/scheduler.h"

#include <algorithm>

#include "util/status.h"

namespace agentkv {

Scheduler::Scheduler(KvManager& kv, SchedulerOptions opt) : kv_(kv), opt_(opt) {
  AGENTKV_CHECK(opt_.max_batch_tokens > 0 && opt_.max_running > 0);
}

void Scheduler::add_waiting(Sequence* s) {
  s->state = Sequence::State::kWaiting;
  waiting_.push_back(s);
}

void Scheduler::add_running(Sequence* s) {
  s->state = Sequence::State::kRunning;
  running_.push_back(s);
}

void Scheduler::remove(Sequence* s) {
  std::erase(running_, s);
  std::erase(waiting_, s);
  s->kv.release();
  s->forget_diffs();
  s->scheduled = false;
}

void Scheduler::preempt(Sequence* s) {
  // Recompute later: the blocks go back to the pool but stay in the prefix cache until evicted, so
  // a resumed sequence usually finds most of its prefix again.
  std::erase(running_, s);
  s->kv.release();
  s->forget_diffs();
  s->state = Sequence::State::kWaiting;
  ++s->n_preemptions;
  ++stats_.preemptions;
  waiting_.push_front(s);
}

bool Scheduler::reclaim_until_free(int64_t blocks) {
  while (kv_.pool().num_free() < blocks)
    if (!reclaim_ || !reclaim_()) return false;
  return true;
}

bool Scheduler::reserve_or_preempt(Sequence* s, int64_t n) {
  reclaim_until_free(s->kv.blocks_needed(n));
  while (s->kv.blocks_needed(n) > kv_.pool().num_free()) {
    Sequence* victim = nullptr;
    for (Sequence* r : running_)
      if (!r->scheduled && (!victim || r->arrival > victim->arrival)) victim = r;
    AGENTKV_CHECK(victim != nullptr);  // s itself is running and not yet scheduled
    preempt(victim);
    if (victim == s) return false;
  }
  AGENTKV_CHECK(s->kv.reserve(n));
  return true;
}

int64_t Scheduler::resume_from_snapshot(Sequence* s) {
  // The longest common prefix of the snapshot and the prompt, leaving the last prompt token to
  // compute (its logits are needed). Used only when it beats what the prefix cache found.
  const std::vector<int32_t>& have = s->resume->tokens();
  const size_t limit = std::min(have.size(), s->tokens.size() - 1);
  size_t common = 0;
  while (common < limit && have[common] == s->tokens[common]) ++common;
  // A compact snapshot resumed in attention: only whole diffs are read through (a hole inside the
  // part resumed must stand for one), so the common part ends before any diff it would cut.
  std::vector<PlacedSegmentDiff> diffs;
  for (const PlacedSegmentDiff& d : s->resume_diffs) {
    const int64_t end = d.first + d.second->master()->n_tokens();
    if (end <= int64_t(common)) diffs.push_back(d);
    else if (d.first < int64_t(common)) common = size_t(d.first);
  }
  if (int64_t(common) <= s->kv.n_tokens()) return 0;
  KvSequence f = s->resume->fork();
  const int64_t kept = f.truncate(int64_t(common));
  if (kept <= s->kv.n_tokens()) return 0;
  s->kv.release();  // the prefix cache's hit, if any, is beaten
  s->kv = std::move(f);
  s->forget_diffs();
  s->diffs = std::move(diffs);
  return kept;
}

std::vector<ScheduledChunk> Scheduler::schedule() {
  std::vector<ScheduledChunk> out;
  int64_t budget = opt_.max_batch_tokens;
  const uint64_t preemptions_before = stats_.preemptions;
  for (Sequence* s : running_) s->scheduled = false;
  auto take = [&](Sequence* s, int64_t n) {
    out.push_back(ScheduledChunk{s, s->kv.n_tokens(), n, s->kv.n_tokens() + n == int64_t(s->tokens.size())});
    s->scheduled = true;
    budget -= n;
  };
  // Decode tokens first, then chunks of unfinished prefills, both in arrival order.
  for (int pass = 0; pass < 2 && budget > 0; ++pass) {
    std::vector<Sequence*> snapshot = running_;
    std::sort(snapshot.begin(), snapshot.end(), [](Sequence* a, Sequence* b) { return a->arrival < b->arrival; });
    for (Sequence* s : snapshot) {
      if (budget <= 0) break;
      if (s->state != Sequence::State::kRunning || s->scheduled) continue;
      const int64_t need = s->n_uncomputed();
      if (need <= 0 || (pass == 0) != (need == 1)) continue;
      const int64_t n = std::min(need, budget);
      if (reserve_or_preempt(s, n)) take(s, n);
    }
  }
  // Admit waiting sequences while nothing had to be preempted in this step.
  if (stats_.preemptions != preemptions_before) return out;
  // Keep a few blocks free for the decode steps of running sequences, so that admitting does not
  // immediately force a preemption.
  const int64_t watermark = running_.empty() ? 0 : std::max<int64_t>(1, kv_.pool().n_blocks() / 100);
  while (!waiting_.empty() && budget > 0 && running_.size() < size_t(opt_.max_running)) {
    Sequence* s = waiting_.front();
    int64_t hit = 0;
    if (s->kv.n_tokens() == 0) {
      hit = s->kv.match_prefix(s->tokens);
      if (s->resume) hit = std::max(hit, resume_from_snapshot(s));
    }
    const int64_t n = std::min(s->n_uncomputed(), budget);
    if (s->kv.blocks_needed(n) + watermark > kv_.pool().num_free() &&
        !reclaim_until_free(s->kv.blocks_needed(n) + watermark)) {
      s->kv.release();  // hits are given back; they stay cached for the next attempt
      break;
    }
    waiting_.pop_front();
    stats_.prefix_query_tokens += s->tokens.size();
    stats_.prefix_hit_tokens += uint64_t(hit);
    if (s->n_cached_prompt < 0) s->n_cached_prompt = int(std::min<int64_t>(hit, s->n_prompt));
    AGENTKV_CHECK(s->kv.reserve(n));
    add_running(s);
    take(s, n);
  }
  return out;
}

}  // namespace agentkv
