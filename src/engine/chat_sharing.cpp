// A chat request with collective KV sharing as one engine-thread job (engine/chat_sharing.h). Each
// phase submits one scheduler request; its completion (deferred past the engine step, Engine::defer)
// queues the blend, which the engine runs with the other requests' blends of that step and hands
// back; the next phase then starts. The engine keeps serving other requests in between. Before the
// plan, masters missing here may be rebuilt from the shared tier's segment index records, one
// scheduler request each (fetch_masters).
#include "engine/chat_sharing.h"

#include <algorithm>
#include <memory>
#include <optional>

#include "engine/chat_contexts.h"

namespace agentkv {

namespace {

// Segment index records looked up in the shared tier per request, hits or not: each GET waits on the
// engine thread (bounded by the tier's timeout), so a request of many new messages costs a few.
constexpr int kMaxMasterLookups = 8;

// A stored context the job uses later, held weakly: the store stays free to evict it while the job
// runs. A job holding it strongly would keep its blocks alive outside the store, where nothing can
// reclaim them and admission counts them as an agent's pin (with many chats in flight on a small
// budget, their answers were refused with 507 for blocks no agent held). Locked when used; a context
// gone by then is simply not reused.
struct HeldHit {
  std::weak_ptr<const KvSequence> context;
  std::weak_ptr<const SegmentStore::Detached> detached;
  bool compact = false;  // it had a detached part (then it must still be there)
  int64_t slot = 0;
  SegmentStore::Ranges blended;

  static HeldHit of(const SegmentStore::Hit& h) {
    return HeldHit{h.context, h.detached, h.detached != nullptr, h.slot, h.blended};
  }
  std::optional<SegmentStore::Hit> lock() const {
    SegmentStore::Hit h{context.lock(), slot, blended, detached.lock()};
    if (!h.context || (compact && !h.detached)) return std::nullopt;
    return h;
  }
};

// A blended run as the stored context's compaction will want it (BlendedRun), its master held weakly.
struct HeldBlend {
  int64_t begin = 0, n = 0;
  std::weak_ptr<const KvSequence> master;
  int32_t master_start = 0;
};

// One run of whole segments (with the role headers between them) that a stored context holds
// contiguously: prompt tokens [begin, end) are its tokens [begin + offset, end + offset).
struct Run {
  int64_t begin = 0, end = 0;
  HeldHit master;  // the stored context holding the run (its expansion serves holes: master_for)
  int64_t offset = 0;
  int segments = 0;
  int64_t segment_tokens = 0;  // tokens of the segments (not the headers between them)
  bool expanded = false;       // blended from an expansion of a compact context, not from the context itself
};

class ChatJob : public std::enable_shared_from_this<ChatJob> {
 public:
  ChatJob(Engine& e, ChatSharingRequest r, ChatEventFn on_event)
      : e_(e), r_(std::move(r)), on_event_(std::move(on_event)) {}
  void start();

 private:
  void fetch_masters();
  void master_built(const RequestEvent& ev, int64_t offset);
  void publish_segments(const KvSequence& context);
  void plan();
  void next_phase();
  void prefix_done(const RequestEvent& ev);
  void blended(Result<BlendedCopy> copy);
  void answer();
  void store(std::shared_ptr<const KvSequence> context);
  void fallback(const std::string& why);
  void fail(ErrorCode code, const std::string& message);
  bool cancelled() const { return r_.cancelled && r_.cancelled->load(); }
  void set_cur(uint64_t h) {
    if (cur_ != h) e_.release_retained(cur_);
    e_.mark_transient(h);  // the job's own, for as long as it runs: never an agent's pin
    cur_ = h;
  }

  Engine& e_;
  ChatSharingRequest r_;
  ChatEventFn on_event_;
  ChatSharingReport rep_;
  std::vector<Run> runs_;
  std::vector<HeldBlend> blends_;      // what the runs became: the stored context's master–diff form
  // The stored context resumed (step 2): its compact part (weakly, for its diffs), its ranges that serve
  // no master, and its tokens resumed.
  std::weak_ptr<const SegmentStore::Detached> resumed_detached_;
  SegmentStore::Ranges resumed_blended_;
  int64_t resumed_tokens_ = 0;
  size_t next_run_ = 0;
  uint64_t cur_ = 0;     // the context the next phase resumes from (a snapshot the job owns)
  uint64_t prefix_ = 0;  // the current run's exact prefix snapshot
  bool done_ = false;
  // fetch_masters: segments [0, fetch_next_) are still to look at (from the last down); those ending
  // at or before fetch_covered_ are reused as a prefix anyway.
  size_t fetch_next_ = 0;
  int64_t fetch_covered_ = 0;
  int fetch_lookups_ = 0, fetch_builds_ = 0;
};

void ChatJob::start() {
  rep_.recompute = r_.recompute;
  if (cancelled()) return fail(ErrorCode::kCancelled, "the request was cancelled");
  if (e_.kv().redis_tier() && r_.max_master_fetches > 0) {
    fetch_next_ = r_.segments.size();
    fetch_covered_ = std::max(cached_prefix_tokens(e_.kv(), r_.params.prompt, r_.params.cache_salt),
                              e_.segments().longest_prefix(r_.params.prompt, r_.params.cache_salt).tokens);
  }
  fetch_masters();
}

void ChatJob::fetch_masters() {
  if (cancelled()) return fail(ErrorCode::kCancelled, "the request was cancelled");
  RedisTier* tier = e_.kv().redis_tier();
  const auto& prompt = r_.params.prompt;
  const int64_t limit = int64_t(prompt.size()) - 1;
  // The last segments first: a master of a transcript's later message usually holds the earlier ones
  // too (master_built indexes them), so one fetch serves a run of several.
  while (tier && fetch_next_ > 0 && fetch_lookups_ < kMaxMasterLookups && fetch_builds_ < r_.max_master_fetches) {
    const auto [sb, se] = r_.segments[--fetch_next_];
    if (se <= fetch_covered_) break;  // segments are in order: every earlier one is covered too
    if (se > limit || se - sb < r_.min_run_tokens) continue;
    const std::span<const int32_t> seg(prompt.data() + sb, size_t(se - sb));
    if (!e_.segments().find(seg, 1).empty()) continue;
    ++fetch_lookups_;
    std::optional<SegmentIndex> rec = tier->load_segment(seg);
    if (!rec) continue;
    ++fetch_builds_;
    const int64_t offset = rec->begin - sb;
    RequestParams p;
    p.prompt = std::move(rec->tokens);
    p.max_tokens = 0;
    p.retain_kv = true;
    p.retain_transient = true;
    p.cache_salt = r_.params.cache_salt;
    auto self = shared_from_this();
    auto id = e_.add_request(std::move(p), [self, offset](const RequestEvent& ev) {
      if (!ev.request_finished) return;
      self->e_.defer([self, ev, offset] { self->master_built(ev, offset); });
    });
    if (id.ok()) return;
    break;  // the engine takes no more now: plan with the masters there are
  }
  plan();
  next_phase();
}

void ChatJob::master_built(const RequestEvent& ev, int64_t offset) {
  if (cancelled()) {
    e_.release_retained(ev.retained_kv);
    return fail(ErrorCode::kCancelled, "the request was cancelled");
  }
  const std::shared_ptr<const KvSequence> master = ev.retained_kv ? e_.take_retained(ev.retained_kv) : nullptr;
  if (master) {  // else that message is prefilled, as without the tier
    // Every segment of this request the master holds exactly at the same distance from the fetched one
    // is indexed with it, so the plan finds the run through them.
    const auto& prompt = r_.params.prompt;
    const auto& mt = master->tokens();
    std::vector<std::pair<int64_t, int64_t>> held;
    for (const auto& [b, e] : r_.segments)
      if (b + offset >= 0 && e + offset <= master->approximate_from() &&
          std::equal(prompt.begin() + b, prompt.begin() + e, mt.begin() + (b + offset)))
        held.emplace_back(b + offset, e + offset);
    ++rep_.fetched_masters;
    rep_.master_tokens_restored += ev.n_cached_prompt;
    rep_.master_tokens_computed += ev.n_prompt - ev.n_cached_prompt;
    e_.segments().add(master, held);
  }
  fetch_masters();
}

void ChatJob::publish_segments(const KvSequence& context) {
  RedisTier* tier = e_.kv().redis_tier();
  if (!tier) return;
  const auto& toks = context.tokens();
  for (const auto& [b, e] : r_.segments) {
    // Blended KV is never published: only segments that end where the context is still exact.
    if (e > context.approximate_from() || e - b < r_.min_run_tokens) continue;
    const std::span<const int32_t> seg(toks.data() + b, size_t(e - b));
    // A segment a stored context already holds exactly was published when that one was kept (or
    // came from the tier): no second record.
    bool known = false;
    for (const SegmentStore::Hit& h : e_.segments().find(seg))
      known = known || h.slot + (e - b) <= h.context->approximate_from();
    if (!known) tier->store_segment(std::span<const int32_t>(toks.data(), size_t(e)), b);
  }
}

void ChatJob::plan() {
  const auto& prompt = r_.params.prompt;
  const int64_t limit = int64_t(prompt.size()) - 1;  // the last prompt token is always computed
  SegmentStore& store = e_.segments();
  // 1. Exact prefix hits.
  const int64_t exact = cached_prefix_tokens(e_.kv(), prompt, r_.params.cache_salt);
  rep_.cached_tokens = exact;
  int64_t base = exact;
  // 2. A stored context continuing this conversation.
  const SegmentStore::PrefixHit ph = store.longest_prefix(prompt, r_.params.cache_salt);
  if (ph.context) {
    // R = 1 asks for exact KV: only the context's exact part is resumed (it may have been blended
    // at another R).
    int64_t common = std::min(ph.tokens, limit);
    if (r_.recompute >= 1.0) common = std::min(common, ph.context->approximate_from());
    const int64_t kept = common;  // the scheduler resumes exactly that many (KvSequence::truncate)
    // Exact hits take precedence: a context whose approximate part starts inside them is not resumed
    // (the scheduler would take its KV over the exact blocks); it can still serve as a master below.
    std::optional<KvSequence> from;
    if (kept > exact && ph.context->approximate_from() >= exact) {
      store.touch(ph.context.get());
      from = resume_stored_context(e_, ph);  // expanded when compact; nullopt: the pool cannot hold it
    }
    if (from) {
      set_cur(e_.adopt_retained(std::move(*from)));
      resumed_detached_ = ph.detached;
      resumed_blended_ = ph.blended;
      resumed_tokens_ = kept;
      rep_.cached_tokens = std::max(exact, std::min(kept, ph.context->approximate_from()));
      rep_.resumed_tokens = kept - rep_.cached_tokens;
      base = kept;
    }
  }
  // 3. Runs of segments held by stored contexts, after what is reused as a prefix.
  const auto& segs = r_.segments;
  uint64_t lookups = 0, hit_tokens = 0;
  int64_t lower = base;  // a run's headers are taken back to here
  size_t i = 0;
  while (i < segs.size() && segs[i].first < base) ++i;
  while (i < segs.size()) {
    const auto [sb, se] = segs[i];
    if (se > limit) break;
    ++lookups;
    const std::span<const int32_t> seg_tokens(prompt.data() + sb, size_t(se - sb));
    Run best;
    size_t best_next = i + 1;
    const KvSequence* best_context = nullptr;
    for (const SegmentStore::Hit& h : store.find(seg_tokens)) {
      const auto& mt = h.context->tokens();
      const int64_t off = h.slot - sb;
      Run run{sb, se, HeldHit::of(h), off, 1, se - sb};
      // The headers before the segment, back to the previous run or prefix, where they match (and the
      // master may serve them: not inside its own blended runs).
      while (run.begin > lower && run.begin + off > 0 && prompt[size_t(run.begin - 1)] == mt[size_t(run.begin - 1 + off)] &&
             h.serves(run.begin - 1 + off, run.begin + off))
        --run.begin;
      // Later whole segments, with the tokens between them, while the context holds them in order.
      size_t j = i + 1;
      for (; j < segs.size(); ++j) {
        const auto [nb, ne] = segs[j];
        if (ne > limit || ne + off > int64_t(mt.size()) || !h.serves(run.end + off, ne + off)) break;
        bool same = true;
        for (int64_t t = run.end; t < ne && same; ++t) same = prompt[size_t(t)] == mt[size_t(t + off)];
        if (!same) break;
        run.end = ne;
        ++run.segments;
        run.segment_tokens += ne - nb;
      }
      // The longest run (of equally long ones the most recent context's: compact or not, so compaction
      // changes no master chosen).
      if (run.end - run.begin > best.end - best.begin) {
        best = run;
        best_next = j;
        best_context = h.context.get();
      }
    }
    if (best_context && best.end - best.begin >= r_.min_run_tokens) {
      hit_tokens += uint64_t(best.segment_tokens);
      store.touch(best_context);
      lower = best.end;
      runs_.push_back(std::move(best));
      i = best_next;
    } else {
      ++i;
    }
  }
  e_.note_sharing(lookups, hit_tokens, uint64_t(std::max<int64_t>(0, rep_.resumed_tokens)), 0);
  if (runs_.empty() && !cur_) rep_.reason = lookups ? "no message of the request has KV to reuse" : "nothing to reuse";
}

void ChatJob::next_phase() {
  if (cancelled()) return fail(ErrorCode::kCancelled, "the request was cancelled");
  if (next_run_ >= runs_.size()) return answer();
  // The exact context before the run (from the resumed context or a previous blend), kept.
  const Run& run = runs_[next_run_];
  RequestParams p;
  p.prompt.assign(r_.params.prompt.begin(), r_.params.prompt.begin() + run.begin);
  p.max_tokens = 0;
  p.retain_kv = true;
  p.retain_transient = true;
  p.kv_from = cur_;
  p.cache_salt = r_.params.cache_salt;
  auto self = shared_from_this();
  auto id = e_.add_request(std::move(p), [self](const RequestEvent& ev) {
    if (!ev.request_finished) return;
    self->e_.defer([self, ev] { self->prefix_done(ev); });
  });
  if (!id.ok()) fallback(id.error());
}

void ChatJob::prefix_done(const RequestEvent& ev) {
  if (ev.retained_kv == 0) {
    if (ev.finish_reason == FinishReason::kCancelled || cancelled())
      return fail(ErrorCode::kCancelled, "the request was cancelled");
    return fallback(ev.error.empty() ? "the context before a shared message was not kept" : ev.error);
  }
  prefix_ = ev.retained_kv;
  e_.mark_transient(prefix_);
  Run& run = runs_[next_run_];
  const std::optional<SegmentStore::Hit> hit = run.master.lock();
  if (!hit) {
    // The store let the run's master go (the pool was short): that run is prefilled exactly, as part
    // of the next phase's prefix (or the answer's), from the exact context just computed.
    set_cur(std::exchange(prefix_, 0));
    ++next_run_;
    return next_phase();
  }
  PendingBlend b;
  b.master = master_for(e_, *hit, run.begin + run.offset, run.end + run.offset);
  if (!b.master) {
    e_.release_retained(std::exchange(prefix_, 0));
    return fallback("the pool cannot hold the expansion of a stored context that holds a shared message");
  }
  run.expanded = b.master != hit->context;
  b.master_is_copy = run.expanded;
  b.master_start = int32_t(run.begin + run.offset);
  b.tokens.assign(r_.params.prompt.begin() + run.begin, r_.params.prompt.begin() + run.end);
  b.prefix = e_.share_retained(prefix_);
  b.options.ratio = r_.recompute;
  auto self = shared_from_this();
  b.done = [self](Result<BlendedCopy> copy) { self->blended(std::move(copy)); };
  e_.queue_blend(std::move(b));
}

void ChatJob::blended(Result<BlendedCopy> copy) {
  e_.release_retained(std::exchange(prefix_, 0));
  if (!copy.ok()) return fallback(copy.error());
  const Run& run = runs_[next_run_];
  const int64_t recomputed = int64_t(copy->recomputed_slots.size());
  rep_.segment_tokens += run.end - run.begin;
  rep_.recomputed_tokens += recomputed;
  rep_.segments += run.segments;
  // A run blended from an expansion stays dense in the stored context (its master is a transient copy).
  if (!run.expanded)
    blends_.push_back(HeldBlend{run.begin, run.end - run.begin, run.master.context, int32_t(run.begin + run.offset)});
  e_.note_sharing(0, 0, uint64_t(run.end - run.begin - recomputed), uint64_t(recomputed));
  set_cur(e_.adopt_retained(std::move(copy->seq)));
  ++next_run_;
  next_phase();
}

void ChatJob::answer() {
  if (cur_) rep_.mode = "tokendance";
  RequestParams p = r_.params;
  p.kv_from = cur_;
  p.retain_kv = true;
  if (r_.keep_start && cur_) {
    if (const KvSequence* s = e_.retained(cur_)) {
      // What the answer resumes from (the scheduler's rule: the common prefix, the last token left).
      const auto& prompt = r_.params.prompt;
      const size_t limit = std::min(s->tokens().size(), prompt.size() - 1);
      size_t common = 0;
      while (common < limit && s->tokens()[common] == prompt[common]) ++common;
      KvSequence f = s->fork();
      rep_.start_tokens = f.truncate(int64_t(common));
      rep_.start_handle = e_.adopt_retained(std::move(f));
      e_.mark_transient(rep_.start_handle);
    }
  }
  auto self = shared_from_this();
  // With nothing resumed or blended, the engine's own prefix match is the exact hit count: the plan
  // looked at RAM only, before admission; the match also restores blocks from a KV tier (disk, Redis).
  const bool exact_path = cur_ == 0;
  Status st = e_.add_request_with_id(r_.request_id, std::move(p), [self, exact_path](const RequestEvent& in) {
    RequestEvent ev = in;
    if (exact_path) self->rep_.cached_tokens = ev.n_cached_prompt;
    ev.n_cached_prompt = int(self->rep_.cached_tokens);
    if (ev.retained_kv) {
      // The whole context becomes a master for later requests.
      if (auto ctx = self->e_.take_retained(ev.retained_kv)) {
        self->publish_segments(*ctx);
        self->store(std::move(ctx));
      }
      ev.retained_kv = 0;
    }
    if (ev.request_finished) {
      self->done_ = true;
      self->set_cur(0);
    }
    self->on_event_(ev, self->rep_);
  });
  if (!st.ok()) {
    set_cur(0);
    fail(st.code(), st.error());
  }
}

void ChatJob::store(std::shared_ptr<const KvSequence> context) {
  // The runs whose masters are still there become master + diff; the others (and a resumed compact
  // context gone meanwhile) stay dense in the stored context: it serves the same KV either way.
  std::vector<BlendedRun> runs;
  for (const HeldBlend& b : blends_)
    if (auto m = b.master.lock()) runs.push_back(BlendedRun{b.begin, b.n, std::move(m), b.master_start});
  SegmentStore::PrefixHit resumed;
  resumed.detached = resumed_detached_.lock();
  resumed.blended = resumed_blended_;
  store_chat_context(e_, std::move(context), r_.segments, runs, resumed, resumed_tokens_);
}

void ChatJob::fallback(const std::string& why) {
  // Exact prefill of the whole request: still correct, only slower.
  set_cur(0);
  runs_.clear();
  blends_.clear();
  resumed_detached_.reset();
  resumed_blended_.clear();
  resumed_tokens_ = 0;
  ChatSharingReport fresh;
  fresh.recompute = r_.recompute;
  // The masters fetched stay fetched (in the segment store, for later requests).
  fresh.fetched_masters = rep_.fetched_masters;
  fresh.master_tokens_restored = rep_.master_tokens_restored;
  fresh.master_tokens_computed = rep_.master_tokens_computed;
  rep_ = std::move(fresh);
  rep_.reason = "shared KV could not be used (" + why + "); answered exactly";
  rep_.cached_tokens = cached_prefix_tokens(e_.kv(), r_.params.prompt, r_.params.cache_salt);
  answer();
}

void ChatJob::fail(ErrorCode code, const std::string& message) {
  if (done_) return;
  done_ = true;
  set_cur(0);
  e_.release_retained(std::exchange(prefix_, 0));
  RequestEvent ev;
  ev.request_id = r_.request_id;
  ev.seq_finished = true;
  ev.request_finished = true;
  ev.n_prompt = int(r_.params.prompt.size());
  if (code == ErrorCode::kCancelled) {
    ev.finish_reason = FinishReason::kCancelled;
  } else {
    ev.finish_reason = FinishReason::kError;
    ev.error = message;
    ev.error_code = code;
  }
  on_event_(ev, rep_);
}

}  // namespace

void start_chat_request(Engine& engine, ChatSharingRequest request, ChatEventFn on_event) {
  auto job = std::make_shared<ChatJob>(engine, std::move(request), std::move(on_event));
  job->start();
}

}  // namespace agentkv
