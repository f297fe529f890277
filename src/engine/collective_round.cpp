// The collective round as one engine-thread job (engine/collective_round.h). Each phase submits
// scheduler requests and the last one's completion starts the next phase (deferred until the engine
// step that finished it is over: Engine::defer), so the engine loop keeps stepping (and serving
// other requests) in between; the collector itself runs there, on the engine thread. A round whose
// turns do not all fit the unpinned KV at once runs in waves: each wave takes the next turns (in
// order) that fit the budget as it stands, runs phases 1-4 for them, and its compacted contexts stay
// pinned for the waves after it; the masters are computed once, in the first wave. The selective
// recompute is batch-invariant, so a turn's copy is the same whichever wave it runs in.
#include "engine/collective_round.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <span>
#include <utility>

#include "engine/request_outcome.h"
#include "engine/segment_collector.h"
#include "util/monotonic_clock.h"

namespace agentkv {

namespace {
// Dense copies the collector builds at once when turns read their blocks in attention.
constexpr size_t kCollectChunk = 4;
}  // namespace

class CollectiveRound : public std::enable_shared_from_this<CollectiveRound> {
 public:
  CollectiveRound(Engine& e, std::vector<RoundTurn> turns, CollectiveRoundOptions o, CollectiveRoundDone done)
      : e_(e), turns_(std::move(turns)), opt_(std::move(o)), done_(std::move(done)) {}

  void start();
  void cancel();

 private:
  struct Group {
    std::vector<int32_t> segment;
    std::vector<size_t> members;
    uint64_t master = 0;
    int32_t master_start = 0;   // where the block starts in master_prompt
    std::vector<int32_t> master_prompt;  // what the master prefills (use_masters), until it is submitted
    uint64_t master_salt = 0;
  };
  // What a group's master prefills, under which salt, and where the block starts in it.
  struct MasterPlan {
    std::vector<int32_t> prompt;
    uint64_t salt = 0;
    int32_t start = 0;
  };
  enum class Phase { kPrefill, kTurns, kDone };

  void submit(RequestParams p, std::function<void(const RequestEvent&)> on_event);
  void begin_submitting() { submitting_ = true; }
  void end_submitting();
  void request_done();
  void note(const RequestEvent& ev, const char* what);
  // A group's master (EngineOptions::master_context): [BOS][block], or the prompt up to the block's end
  // of the member whose context the prefix cache holds most of.
  MasterPlan plan_master(const Group& g, MasterContext where) const;
  // Every group's master, and the blocks they take together.
  std::pair<std::vector<MasterPlan>, int64_t> plan_masters(MasterContext where) const;
  // The groups' masters become `plans` (master_blocks_ their blocks); the report names where.
  void use_masters(std::pair<std::vector<MasterPlan>, int64_t> plans, MasterContext where);
  // How many turns from next_ the next wave takes, with `masters` blocks still to compute beside them.
  size_t wave_turns(int64_t masters, const KvBudget& b) const;
  bool plan_wave();
  void start_wave();
  void collect();
  void run_turns();
  void finish_wave();
  void finish();
  bool kept(size_t i) const { return opt_.keep_blended && (opt_.keep_only.empty() || opt_.keep_only[i]); }
  void fail(Error error);
  // The first error wins; the job fails with it once its requests are done.
  void set_error(ErrorCode code, std::string message) {
    if (error_.message.empty()) error_ = Error{code, std::move(message)};
  }
  void release_all();

  Engine& e_;
  std::vector<RoundTurn> turns_;
  CollectiveRoundOptions opt_;
  CollectiveRoundDone done_;
  CollectiveRoundResult res_;
  std::vector<Group> groups_;
  std::vector<int> group_of_;                  // per turn: its group, or -1
  std::vector<uint64_t> prefix_, blended_;     // per turn: snapshots the job owns until it ends
  std::vector<uint64_t> live_;                 // request ids in flight
  std::vector<int64_t> turn_blocks_;           // per turn: unpinned blocks it may need (admission)
  std::vector<int64_t> turn_tokens_;           // per turn: the worst-case tokens behind them
  int64_t master_blocks_ = 0;                  // every master, until the first wave computed them
  // Read in attention (EngineOptions::resume_in_attention): the collector builds at most this many
  // dense copies at once, each compacted before the next chunk (0: the whole wave at once), and a
  // wave leaves room for one chunk's copies.
  size_t collect_chunk_ = 0;
  int64_t chunk_blocks_ = 0;
  bool masters_made_ = false;
  std::vector<size_t> wave_;                   // the turns of the wave running
  size_t next_ = 0;                            // the first turn no wave has taken
  int pending_ = 0;
  bool submitting_ = false;
  bool cancelled_ = false;
  Error error_{ErrorCode::kInternal, ""};  // empty message: no error
  Phase phase_ = Phase::kPrefill;
  double t0_ = 0;
};

void CollectiveRound::submit(RequestParams p, std::function<void(const RequestEvent&)> on_event) {
  auto self = shared_from_this();
  ++pending_;
  auto id = e_.add_request(std::move(p), [self, on_event = std::move(on_event)](const RequestEvent& ev) {
    on_event(ev);
    if (ev.request_finished) {
      std::erase(self->live_, ev.request_id);
      // The next phase adds requests and runs the collector: not from inside Engine::step.
      self->e_.defer([self] { self->request_done(); });
    }
  });
  if (!id.ok()) {
    set_error(id.code(), id.error());
    --pending_;
    return;
  }
  live_.push_back(*id);
}

void CollectiveRound::end_submitting() {
  submitting_ = false;
  if (pending_ == 0) request_done();
  else if (cancelled_) cancel();
}

void CollectiveRound::request_done() {
  if (pending_ > 0) --pending_;
  if (submitting_ || pending_ > 0) return;
  if (cancelled_) set_error(ErrorCode::kCancelled, "the round was cancelled");
  if (!error_.message.empty()) return fail(error_);
  if (phase_ == Phase::kPrefill) {
    collect();
    if (phase_ != Phase::kDone) run_turns();
  } else if (phase_ == Phase::kTurns) {
    finish_wave();
    if (phase_ == Phase::kDone) return;
    if (next_ < turns_.size()) {
      if (plan_wave()) start_wave();
    } else {
      finish();
    }
  }
}

void CollectiveRound::note(const RequestEvent& ev, const char* what) {
  if (!ev.seq_finished || !error_.message.empty()) return;
  if (!ev.error.empty()) set_error(ev.error_code, ev.error);
  else if (ev.finish_reason == FinishReason::kCancelled) set_error(ErrorCode::kCancelled, "the round was cancelled");
  else if (ev.seq_index == 0 && ev.retained_kv == 0) set_error(ErrorCode::kInternal, std::string(what) + " was not retained");
}

void CollectiveRound::start() {
  const size_t n = turns_.size();
  t0_ = monotonic_seconds();
  res_.turns.resize(n);
  group_of_.assign(n, -1);
  prefix_.assign(n, 0);
  blended_.assign(n, 0);
  if (!opt_.keep_only.empty() && opt_.keep_only.size() != n)
    return fail(make_error(ErrorCode::kInvalidArgument, "the round's keep_only does not have one entry per turn"));
  RoundSharingReport& rep = res_.sharing;
  if (opt_.recompute) rep.recompute = *opt_.recompute;
  // Groups: one per block (the same tokens; a block tokenized on its own is the same in every context).
  std::map<std::vector<int32_t>, std::vector<size_t>> by_block;
  for (size_t i = 0; opt_.recompute && i < n; ++i) {
    const auto& p = turns_[i].params.prompt;
    const auto [b, end] = turns_[i].segment;
    if (b < 1 || end <= b || end > int64_t(p.size())) continue;
    by_block[std::vector<int32_t>(p.begin() + b, p.begin() + end)].push_back(i);
  }
  for (auto& [segment, members] : by_block) {
    if (members.size() < 2) continue;  // one agent alone has nothing to share with
    for (size_t i : members) group_of_[i] = int(groups_.size());
    Group g;
    g.segment = segment;
    g.members = members;
    groups_.push_back(std::move(g));
  }
  if (groups_.empty())
    rep.reason = opt_.recompute ? "fewer than two agents hold the round's block as a segment" : opt_.exact_reason;

  // Admission before work (engine/kv_admission.h): a turn's new context is kept until the round
  // commits; a sharing agent adds the partial last blocks its prefix and its blended copy copy on
  // write, and the first wave one master per block. The round as a whole need not fit at once (it
  // runs in waves), but its largest turn beside the masters must, or it never could.
  turn_blocks_.assign(n, 0);
  turn_tokens_.assign(n, 0);
  size_t largest = 0;
  for (size_t i = 0; i < n; ++i) {
    const KvDemand d = e_.kv_demand(turns_[i].params);
    turn_blocks_[i] = d.need_blocks - d.reused_blocks + (group_of_[i] >= 0 ? 2 : 0);
    turn_tokens_[i] = d.tokens;
    if (turn_blocks_[i] > turn_blocks_[largest]) largest = i;
  }
  const int bs = e_.kv().block_size();
  use_masters(plan_masters(e_.master_context()), e_.master_context());
  if (e_.resume_in_attention() && !groups_.empty()) {
    // A sharing turn holds its block as master + diff from the collector on: the block's dense blocks
    // are the collector's, a chunk at a time; the diff's rows are bounded by what it recomputes, stored
    // at most as f16 rows (a block's worth of rows per block).
    collect_chunk_ = kCollectChunk;
    const RecomputeOptions ro{};
    for (size_t i = 0; i < n; ++i) {
      if (group_of_[i] < 0) continue;
      const int64_t seg = turns_[i].segment.second - turns_[i].segment.first;
      const int64_t dense = (seg + bs - 1) / bs + 1;
      const int64_t rows = int64_t(std::ceil(*opt_.recompute * double(seg))) + ro.n_first + ro.n_last + 1;
      const int64_t diff = (std::min(rows, seg) + bs - 1) / bs + 1;
      turn_blocks_[i] = std::max<int64_t>(diff + 2, turn_blocks_[i] - dense + diff);
      chunk_blocks_ = std::max(chunk_blocks_, dense + diff);
    }
    chunk_blocks_ *= int64_t(collect_chunk_);
  }
  if (n > 0) {
    const std::string what = "the largest turn of the round of " + std::to_string(n) +
                             " agents (with the round's shared blocks)";
    const auto admitted = [&] {
      return e_.check_admission(KvDemand{turn_blocks_[largest] + master_blocks_, 0, turn_tokens_[largest]}, what);
    };
    Status st = admitted();
    if (e_.master_context() == MasterContext::kAgent && !groups_.empty()) {
      // An agent's whole context as a master can be far more KV than [BOS][block] (a long history's
      // every earlier round, where a turn resumed from its resident context adds only the block and its
      // own text). Where the budget cannot hold it beside the largest turn, or it would make the first
      // wave take fewer turns, the masters are [BOS][block] (the report names it): the master's place
      // trades quality for KV only while the budget has room for it.
      const KvBudget b = e_.kv_budget();
      auto block = plan_masters(MasterContext::kBlock);
      if (!st.ok() || wave_turns(master_blocks_, b) < wave_turns(block.second, b)) {
        use_masters(std::move(block), MasterContext::kBlock);
        st = admitted();
      }
    }
    if (!st.ok()) return fail(st.status_error());
  }
  if (plan_wave()) start_wave();
}

std::pair<std::vector<CollectiveRound::MasterPlan>, int64_t> CollectiveRound::plan_masters(MasterContext where) const {
  const int bs = e_.kv().block_size();
  std::pair<std::vector<MasterPlan>, int64_t> out;
  // Every block of each master's prompt (those the prefix cache serves are pinned by it as well).
  for (const Group& g : groups_) {
    out.first.push_back(plan_master(g, where));
    out.second += (int64_t(out.first.back().prompt.size()) + bs - 1) / bs;
  }
  return out;
}

void CollectiveRound::use_masters(std::pair<std::vector<MasterPlan>, int64_t> plans, MasterContext where) {
  for (size_t g = 0; g < groups_.size(); ++g) {
    groups_[g].master_prompt = std::move(plans.first[g].prompt);
    groups_[g].master_salt = plans.first[g].salt;
    groups_[g].master_start = plans.first[g].start;
  }
  master_blocks_ = plans.second;
  res_.sharing.master_context = groups_.empty() ? "" : master_context_name(where);
}

CollectiveRound::MasterPlan CollectiveRound::plan_master(const Group& g, MasterContext where) const {
  MasterPlan p;
  if (where == MasterContext::kAgent) {
    // A member's own context, exact (its earlier rounds' part from the prefix cache, under its salt):
    // not from its resident context, whose blended runs would make the master approximate. The member
    // with the fewest tokens left to prefill, the first on a tie: in a society that keeps its order, the
    // same agent every round, whose previous master the prefix cache holds up to its last block.
    size_t best = g.members.front();
    int64_t best_cost = std::numeric_limits<int64_t>::max();
    for (size_t i : g.members) {
      const RoundTurn& t = turns_[i];
      const std::span<const int32_t> upto(t.params.prompt.data(), size_t(t.segment.second));
      const int64_t cost = t.segment.second - cached_prefix_tokens(e_.kv(), upto, t.params.cache_salt);
      if (cost < best_cost) best = i, best_cost = cost;
    }
    const RoundTurn& t = turns_[best];
    p.prompt.assign(t.params.prompt.begin(), t.params.prompt.begin() + t.segment.second);
    p.salt = t.params.cache_salt;
    p.start = int32_t(t.segment.first);
    return p;
  }
  const Tokenizer& tok = *e_.model().tokenizer;
  if (tok.add_bos_default()) p.prompt.push_back(tok.bos_id());
  p.start = int32_t(p.prompt.size());
  p.prompt.insert(p.prompt.end(), g.segment.begin(), g.segment.end());
  return p;
}

size_t CollectiveRound::wave_turns(int64_t masters, const KvBudget& b) const {
  // The next turns, in order, whose demands fit the unpinned KV as it stands now (earlier waves'
  // contexts and kept copies are pinned by now).
  // A wave also leaves room for compacting its contexts one by one: a context's packed diff rows are
  // allocated while its dense copy is still held (at most the blocks the diff replaces, + 1 partial),
  // and each compaction frees more than the next needs. Without that room a context would stay dense.
  const int64_t room = b.total_blocks - b.pinned_blocks - masters;
  int64_t compaction = 0;
  for (size_t i = next_; i < turns_.size(); ++i)
    if (group_of_[i] >= 0) compaction = std::max(compaction, turn_blocks_[i] + 1);
  if (collect_chunk_ > 0) compaction = chunk_blocks_;  // compacted at collection, a chunk at a time
  size_t k = next_;
  int64_t used = 0;
  while (k < turns_.size() && used + turn_blocks_[k] <= (k == next_ ? room : room - compaction)) {  // one turn: it must fit
    used += turn_blocks_[k];
    ++k;
  }
  return k - next_;
}

bool CollectiveRound::plan_wave() {
  const KvBudget b = e_.kv_budget();
  const int64_t masters = masters_made_ ? 0 : master_blocks_;
  wave_.clear();
  for (size_t k = wave_turns(masters, b); k > 0; --k) wave_.push_back(next_++);
  if (wave_.empty() && next_ < turns_.size()) {
    const KvDemand d{turn_blocks_[next_] + masters, 0, turn_tokens_[next_]};
    Status st = check_kv_fit(d, b,
                             "turn " + std::to_string(next_) + " of the round of " + std::to_string(turns_.size()) +
                                 " agents (after " + std::to_string(next_) + " turns kept for the round's commit)");
    if (st.ok()) st = Status(make_error(ErrorCode::kKvPinned, "the round's next turn does not fit the KV budget"));
    fail(st.status_error());
    return false;
  }
  ++res_.sharing.waves;
  return true;
}

void CollectiveRound::start_wave() {
  // 1. The wave's sharing agents' prefixes (from their resident contexts) and, in the first wave,
  //    one master per block.
  phase_ = Phase::kPrefill;
  begin_submitting();
  for (size_t i : wave_) {
    if (group_of_[i] < 0) continue;
    RequestParams p;
    p.prompt.assign(turns_[i].params.prompt.begin(), turns_[i].params.prompt.begin() + turns_[i].segment.first);
    p.max_tokens = 0;
    p.retain_kv = true;
    p.kv_from = turns_[i].params.kv_from;
    p.cache_salt = turns_[i].params.cache_salt;
    submit(std::move(p), [this, i](const RequestEvent& ev) {
      note(ev, "an agent's prefix");
      if (ev.seq_finished) prefix_[i] = ev.retained_kv;
    });
  }
  for (size_t g = 0; !masters_made_ && g < groups_.size(); ++g) {
    RequestParams m;
    m.prompt = std::move(groups_[g].master_prompt);
    m.cache_salt = groups_[g].master_salt;
    m.max_tokens = 0;
    m.retain_kv = true;
    submit(std::move(m), [this, g](const RequestEvent& ev) {
      note(ev, "the block's master");
      if (ev.seq_finished) {
        groups_[g].master = ev.retained_kv;
        res_.sharing.master_tokens_computed += ev.n_prompt - ev.n_cached_prompt;
      }
    });
  }
  masters_made_ = true;
  end_submitting();
}

void CollectiveRound::collect() {
  // 2. The wave's copies of each block, one collective step per block.
  if (groups_.empty()) return;
  RoundSharingReport& rep = res_.sharing;
  RecomputeOptions ro;
  ro.ratio = *opt_.recompute;
  const double c0 = monotonic_seconds();
  for (size_t g = 0; g < groups_.size(); ++g) {
    const Group& group = groups_[g];
    std::vector<size_t> all;
    for (size_t i : wave_)
      if (group_of_[i] == int(g)) all.push_back(i);
    if (all.empty()) continue;
    // A chunk at a time when read in attention (the selective recompute is batch-invariant: the same
    // copies whatever the chunks).
    const size_t chunk = collect_chunk_ > 0 ? collect_chunk_ : all.size();
    for (size_t c0 = 0; c0 < all.size(); c0 += chunk) {
      const std::vector<size_t> members(all.begin() + int64_t(c0), all.begin() + int64_t(std::min(all.size(), c0 + chunk)));
      std::vector<uint64_t> prefixes;
      for (size_t i : members) prefixes.push_back(prefix_[i]);
      auto copies = collect_shared_segment(e_, group.master, group.master_start, group.segment, prefixes, ro);
      // The blended copies share what they need of the prefixes.
      for (size_t i : members)
        if (!kept(i)) e_.release_retained(std::exchange(prefix_[i], 0));
      if (!copies.ok()) return fail(copies.status_error());
      for (size_t k = 0; k < members.size(); ++k) {
        const size_t i = members[k];
        blended_[i] = (*copies)[k].handle;
        // Read in attention, the turn runs from the copy's master + diff: its dense segment goes now,
        // losslessly (the turn reads the blend as the collector made it: a lossy diff's error would
        // otherwise reach the answer, sharing_gate.h). A lossy format is applied at the turn's end
        // (finish_wave), encoding the rows once.
        if (collect_chunk_ > 0)
          e_.compact_retained(blended_[i], turns_[i].segment.first, group.master, group.master_start, 0,
                              DiffFormat::kF16);
        res_.turns[i].shared = true;
        res_.turns[i].recomputed = int64_t((*copies)[k].recomputed_slots.size());
        rep.recomputed_tokens += res_.turns[i].recomputed;
      }
    }
    rep.agents += int(all.size());
    rep.segment_tokens = std::max<int64_t>(rep.segment_tokens, int64_t(group.segment.size()));
  }
  rep.collector_seconds += monotonic_seconds() - c0;
  rep.mode = "tokendance";
  rep.reason = opt_.exact_reason;  // e.g. another model of the round runs exactly
}

void CollectiveRound::run_turns() {
  // 3. The wave's turns, each from its blended copy when shared (the longest common prefix with it
  //    is reused).
  phase_ = Phase::kTurns;
  begin_submitting();
  for (size_t i : wave_) {
    RequestParams p = turns_[i].params;
    p.retain_kv = true;
    if (blended_[i]) p.kv_from = blended_[i];
    submit(std::move(p), [this, i](const RequestEvent& ev) {
      RoundTurnOutcome& o = res_.turns[i];
      if (ev.has_token && o.ttft < 0) o.ttft = monotonic_seconds() - t0_;
      note(ev, "an agent's turn");
      if (ev.seq_index == 0) fold(o.answer, ev);
    });
  }
  end_submitting();
}

void CollectiveRound::finish_wave() {
  // 4. Master–diff: each shared agent's new context keeps the master by reference and its diff rows.
  //    A context the pool cannot compact stays dense (still correct, only larger). The copies it was
  //    blended from are done with, unless kept for the caller.
  for (size_t i : wave_) {
    const int g = group_of_[i];
    if (g < 0 || !blended_[i]) continue;
    e_.compact_retained(res_.turns[i].answer.retained_kv, turns_[i].segment.first, groups_[size_t(g)].master,
                        groups_[size_t(g)].master_start, turns_[i].params.kv_from);
    if (!kept(i)) e_.release_retained(std::exchange(blended_[i], 0));
  }
}

void CollectiveRound::finish() {
  if (opt_.keep_blended) {
    res_.masters.assign(turns_.size(), {0, 0});
    for (size_t i = 0; i < turns_.size(); ++i) {
      res_.turns[i].blended = std::exchange(blended_[i], 0);
      res_.turns[i].prefix = std::exchange(prefix_[i], 0);
      if (group_of_[i] >= 0) res_.masters[i] = {groups_[size_t(group_of_[i])].master, groups_[size_t(group_of_[i])].master_start};
    }
  } else {
    for (const Group& g : groups_) e_.release_retained(g.master);  // the compact contexts hold forks of it
  }
  if (opt_.release_resumed)
    for (const RoundTurn& t : turns_) e_.release_retained(t.params.kv_from);
  phase_ = Phase::kDone;
  done_(std::move(res_));
}

void CollectiveRound::release_all() {
  for (uint64_t& h : prefix_) e_.release_retained(std::exchange(h, 0));
  for (uint64_t& h : blended_) e_.release_retained(std::exchange(h, 0));
  for (Group& g : groups_) e_.release_retained(std::exchange(g.master, 0));
  for (RoundTurnOutcome& o : res_.turns) e_.release_retained(std::exchange(o.answer.retained_kv, 0));
}

void CollectiveRound::fail(Error error) {
  if (phase_ == Phase::kDone) return;
  phase_ = Phase::kDone;
  release_all();
  res_.status = std::move(error);
  done_(std::move(res_));
}

void CollectiveRound::cancel() {
  cancelled_ = true;
  if (submitting_) return;  // end_submitting cancels what was queued
  const std::vector<uint64_t> ids = live_;
  for (uint64_t id : ids) e_.cancel(id);
}

std::shared_ptr<CollectiveRound> start_collective_round(Engine& engine, std::vector<RoundTurn> turns,
                                                        CollectiveRoundOptions options, CollectiveRoundDone done) {
  auto job = std::make_shared<CollectiveRound>(engine, std::move(turns), std::move(options), std::move(done));
  job->start();
  return job;
}

void cancel_collective_round(CollectiveRound& job) { job.cancel(); }

void finish_collective_round(Engine& engine, const CollectiveRoundResult& result, const std::vector<uint64_t>& resumed,
                             bool commit) {
  if (!result.status.ok()) return;  // a failed round holds nothing
  if (commit) {
    for (uint64_t h : resumed) engine.release_retained(h);
    return;
  }
  for (const RoundTurnOutcome& o : result.turns) {
    engine.release_retained(o.answer.retained_kv);
    engine.release_retained(o.blended);
    engine.release_retained(o.prefix);
  }
  for (const auto& [m, start] : result.masters) engine.release_retained(m);
}

}  // namespace agentkv
