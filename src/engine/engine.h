// The serving core for one model: requests and their sequences, the scheduler, the KV manager, one
// batched forward pass per step, sampling and per-token events. Single-threaded by design: exactly
// one thread (EngineLoop's, or a benchmark's / test's own) calls add_request / cancel / step.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/blend_queue.h"
#include "engine/compact_context.h"
#include "engine/engine_metrics.h"
#include "engine/kv_admission.h"
#include "engine/request.h"
#include "engine/scheduler.h"
#include "engine/sequence.h"
#include "kv/kv_diff_codec.h"
#include "kv/kv_manager.h"
#include "kv/segment_store.h"
#include "model/loaded_model.h"
#include "util/thread_pool.h"

namespace agentkv {

// Where a collective round (engine/collective_round.h) computes each shared block's master, the KV its
// sharing agents' copies are blended from:
//   kBlock: on its own, [BOS][block];
//   kAgent: in the context of one of the block's sharing turns (the one with the fewest tokens left to
//     prefill after the prefix cache, the first on a tie), that turn's prompt up to the block's end, so
//     the master is that agent's exact KV and, for every other agent, was computed after what their
//     contexts hold in common (in a long history, every earlier round's block): the rows the collector
//     does not recompute then deviate less from each agent's exact rows (BENCHMARKS.md, "The master
//     computed in an agent's context"). It costs that turn's prompt prefilled exactly once a round (the
//     prefix cache keeps the earlier rounds' part: the same agent's previous master) and held dense until
//     the round ends; where the budget cannot hold it beside the round's largest turn, the round's
//     masters are [BOS][block] instead (RoundSharingReport::master_context names it).
enum class MasterContext { kBlock, kAgent };
const char* master_context_name(MasterContext c);
// "block" or "agent"; anything else: an error naming the choices.
Result<MasterContext> parse_master_context(std::string_view text);

struct EngineOptions {
  KvManagerOptions kv;
  SchedulerOptions scheduler;
  // Longest sequence (prompt + generated); 0: the model's training context. It is also the context per
  // sequence by which LongRoPE files pick their factors: create refuses a model loaded for a context
  // that picks the other set (loaded_model.h's fit_model_to_context).
  int n_ctx = 0;
  int max_n = 64;         // largest n per request
  int max_top_logprobs = 20;
  // Chat contexts stored with blended runs keep only master + diff for them (engine/compact_context.h).
  // A compact context serves what its dense copy would, through its expansion (kv/segment_store.h), so
  // it changes what is held, never what is served.
  bool chat_compact = true;
  // A blended run's whole blocks never serve as a master (kv/segment_store.h): each message is blended
  // from the context that computed it. Off by default: it costs prefill (BENCHMARKS.md, "Master + diff
  // for blended chat contexts": 44% of exact prefill instead of 35% at R = 0.15).
  bool chat_original_masters = false;
  // How a compact context stores its diff rows (kv/kv_diff_codec.h): f16 keeps them bit for bit;
  // int8 / int4 keep their difference from the re-rotated master within a stated bound, in about a
  // half / a quarter of the bytes (BENCHMARKS.md, "Smaller diffs"). Retained and chat contexts alike.
  DiffFormat diff_format = DiffFormat::kF16;
  // A request resuming from a compact context (RequestParams::kv_from) reads its blended runs from
  // their masters inside attention (share/master_diff_attention.h) instead of restoring a dense copy
  // first: the context costs its diff rows, not a dense segment, while the request runs, and its new
  // context stays in master–diff form (the runs' records kept as they are). Attention then rounds a
  // master row's score through the rotated query instead of the rotated key, within the stated bound
  // of ops/attention_spans.h, so a reply may differ from the dense copy's in rare near-ties.
  bool resume_in_attention = false;
  // Echoes (engine/compact_context.h find_echoes): when a round's context is compacted, a run of at
  // least one block of the agent's own earlier text that the round's shared block quotes (its last
  // answer, read back in the digest) is stored as that block's master rows plus this share of its rows,
  // those deviating most from the master's, in diff_format; the rest of the run is served from the
  // master, an approximation like the block's own. Unset: the agent's own text is kept as computed.
  std::optional<double> echo_keep;
  MasterContext master_context = MasterContext::kBlock;
};

// The one context-length check (the engine's, the server's and generate's): `what`, of `tokens`
// tokens, plus `reserve` more to come (a prompt needs room for one generated token) must fit a
// context of n_ctx tokens; else ErrorCode::kTooLarge, "<what> has N tokens; the model's context is M".
Status check_context(int64_t tokens, int n_ctx, const std::string& what, int64_t reserve = 1);

class Engine {
 public:
  static Result<std::unique_ptr<Engine>> create(const LoadedModel& model, const EngineOptions& opt,
                                                ThreadPool& pool);
  ~Engine();

  const LoadedModel& model() const { return lm_; }
  int n_ctx() const { return n_ctx_; }
  KvManager& kv() { return *kv_; }
  const KvManager& kv() const { return *kv_; }
  // The pool the forward passes run on (work outside the scheduler, e.g. the KV collector, uses it too).
  ThreadPool& pool() const { return pool_; }

  // Checks a request against the model and the KV budget; the error names the bad field. Const and
  // thread-safe, so server threads can reject bad requests without a round trip to the engine.
  Status validate(const RequestParams& p) const;
  // Admission before work (engine/kv_admission.h), engine thread only: the budget as it stands (blocks
  // pinned by retained snapshots), a request's worst case (less the pinned blocks of its kv_from it
  // reuses), and the one fit check, which add_request_with_id and the collective round make before
  // any prefill. Error kResourceExhausted (never fits) or kKvPinned (fits once pins are released).
  KvBudget kv_budget() const;
  KvDemand kv_demand(const RequestParams& p) const;
  Status check_admission(const KvDemand& d, const std::string& what) const;
  // Ids are unique per engine; thread-safe.
  uint64_t next_request_id() { return next_id_.fetch_add(1) + 1; }

  // Queues a request (validated again); events go to cb on the calling (engine) thread.
  Result<uint64_t> add_request(RequestParams p, RequestCallback cb);
  Status add_request_with_id(uint64_t id, RequestParams p, RequestCallback cb);
  // Stops a request now: its blocks are freed and it gets a final "cancelled" event. Unknown ids
  // (already finished) are ignored.
  void cancel(uint64_t id);
  // Runs fn on the engine thread as soon as the engine is not inside step() (at once when called
  // outside it). A request callback that starts more work, such as a collective round's next phase
  // (engine/collective_round.h), defers it, so nothing adds requests or runs passes while step()
  // still walks the batch whose events it is handing out.
  void defer(std::function<void()> fn);
  // The KV collector across requests (engine/blend_queue.h): queued blends run together once the
  // current step's deferred work is done (at once when called outside a step).
  void queue_blend(PendingBlend blend);

  // The segment cache of chat sharing (kv/segment_store.h): contexts kept after requests, evicted
  // least recently used first when the scheduler is short of blocks. Engine thread only.
  SegmentStore& segments() { return segments_; }
  bool chat_compact() const { return opt_.chat_compact; }
  bool chat_original_masters() const { return opt_.chat_original_masters; }
  DiffFormat diff_format() const { return opt_.diff_format; }
  // Counts chat sharing's work into the metrics: segments looked up, their tokens found with KV,
  // tokens whose KV was reused approximately (not recomputed), tokens selectively recomputed.
  void note_sharing(uint64_t lookups, uint64_t hit_tokens, uint64_t reused, uint64_t recomputed);
  // Counts a cross-model KV transfer into this engine (a context adopted with adopt_retained): the
  // tokens whose K/V was projected from the sender, and the tokens this model computed itself and
  // the time they took (prefill outside the scheduler).
  void note_transfer(uint64_t projected_tokens, uint64_t native_tokens, double native_seconds);

  bool has_work() const { return !requests_.empty(); }
  // One scheduling step and forward pass. An error is an engine bug (inputs were validated).
  Status step();
  // Steps until every request has finished.
  Status run_until_idle();

  EngineMetrics metrics() const;

  // Retained KV snapshots: the resident contexts of agents. A snapshot holds references to its
  // blocks, so they are neither freed nor evicted until it is released. Engine thread only.
  // A new snapshot sharing every block of `handle` (0 if the handle is unknown).
  uint64_t fork_retained(uint64_t handle);
  // Takes a sequence built outside the scheduler (e.g. an agent's context blended from a shared
  // segment by src/share/) as a new snapshot; requests then start from it with kv_from.
  uint64_t adopt_retained(KvSequence seq);
  // A snapshot a job holds only while it runs (a chat request's prefix or blended context, not an
  // agent's resident context): its blocks come back soon, so admission counts them as unpinned, as it
  // does a running request's. Released or taken, the mark goes with it.
  void mark_transient(uint64_t handle);
  // Unknown handles are ignored.
  void release_retained(uint64_t handle);
  // Ends a dense snapshot and hands its sequence over (nullptr if unknown or compact).
  std::shared_ptr<const KvSequence> take_retained(uint64_t handle);
  // The snapshot's sequence, shared (nullptr if unknown or compact): it lives while held.
  std::shared_ptr<const KvSequence> share_retained(uint64_t handle) const;
  // nullptr if unknown or compacted.
  const KvSequence* retained(uint64_t handle) const;
  // Queues the exact full blocks of a dense snapshot for the shared KV tiers again
  // (KvManager::publish_sequence), before its agent moves to another server; the blocks queued (0 for
  // a compact snapshot: its exact prefix was published when computed), -1 for an unknown handle.
  int64_t publish_retained(uint64_t handle);
  size_t n_retained() const { return retained_.size() + compact_.size(); }
  // Master–diff storage (engine/compact_context.h): replaces the dense snapshot `handle`, whose
  // slots [seg_begin, …) hold the segment the KV collector built from the snapshot `master`
  // (segment at master_start..), by the compact form, its diff rows in EngineOptions::diff_format;
  // the handle stays valid. A request resuming from it (kv_from), or a fork, gets a dense copy
  // rebuilt (bit for bit with the lossless format). False (the snapshot stays dense) when the pool
  // is short or a handle is unknown.
  // resumed_from: the compact snapshot `handle`'s context resumed from (0: none), e.g. an agent's
  // context of the round before: its diffs whose runs lie before seg_begin, inside the tokens both
  // contexts start with, are kept in the new compact form too (re-encoded from `handle`'s own K/V), so
  // a context that accumulates blended segments round after round stays master + diff throughout.
  // With EngineOptions::echo_keep, the context's own text between its last earlier diff and seg_begin
  // that the master's segment quotes is compacted too, as echoes (engine/compact_context.h).
  // format: the new diff's format (default EngineOptions::diff_format). A compact snapshot (resumed in
  // attention) whose run is compact already in another format gets the run restored and encoded again
  // in this one, its other diffs' records copied as they are: one set of packed rows again.
  bool compact_retained(uint64_t handle, int64_t seg_begin, uint64_t master, int32_t master_start,
                        uint64_t resumed_from = 0, std::optional<DiffFormat> format = std::nullopt);
  bool is_compact(uint64_t handle) const { return compact_.count(handle) != 0; }
  // A new snapshot of the same context for another agent (an agent fork): with resume_in_attention a
  // compact one stays compact, sharing its masters and diffs; otherwise fork_retained. 0 as fork_retained.
  uint64_t fork_context(uint64_t handle);
  // The compact snapshot (nullptr if unknown or dense).
  std::shared_ptr<const CompactContext> compact_context(uint64_t handle) const;
  // Takes a sequence with holes where `diffs` stand (a blended copy of a compact context) as a new
  // compact snapshot.
  uint64_t adopt_compact(KvSequence seq, std::vector<PlacedSegmentDiff> diffs);
  bool resume_in_attention() const { return opt_.resume_in_attention; }
  MasterContext master_context() const { return opt_.master_context; }

 private:
  struct RequestState {
    RequestParams params;
    RequestCallback cb;
    std::vector<std::unique_ptr<Sequence>> seqs;
    int n_finished = 0;
    bool forked = false;
    double arrival_time = 0;
    bool first_token_seen = false;
  };

  Engine(const LoadedModel& model, const EngineOptions& opt, ThreadPool& pool, std::unique_ptr<KvManager> kv);
  // compact_retained's echoes of `ctx` (EngineOptions::echo_keep): between the end of its last diff in
  // `earlier` that ends by seg_begin, and seg_begin; none without such a diff.
  // Counts the echoes' tokens compact() dropped (EngineMetrics::echo_tokens).
  void note_echoes(const KvSequence& before, const CompactContext& after, const std::vector<BlendedRun>& echoes);
  std::vector<BlendedRun> echoes_before(const KvSequence& ctx, const std::vector<PlacedSegmentDiff>& earlier,
                                        int64_t seg_begin, const std::shared_ptr<const KvSequence>& master,
                                        int32_t master_start) const;
  std::unique_ptr<Sequence> make_sequence(const RequestState& r, uint64_t id, int index, uint64_t arrival);
  void on_logits(Sequence* s, const float* logits);
  void sample_and_emit(RequestState& r, Sequence* s, float* logits);
  void finish_sequence(RequestState& r, Sequence* s, RequestEvent& ev, FinishReason reason);
  void fail_request(uint64_t id, const Error& error);

  const LoadedModel& lm_;
  EngineOptions opt_;
  ThreadPool& pool_;
  std::unique_ptr<KvManager> kv_;
  Scheduler scheduler_;
  int n_ctx_;
  std::map<uint64_t, RequestState> requests_;
  std::vector<uint64_t> finished_ids_;
  std::atomic<uint64_t> next_id_{0};
  uint64_t next_arrival_ = 0;
  Batch batch_;
  std::vector<float> logits_;
  std::vector<float> scratch_logits_;
  std::vector<int32_t> eog_ids_;
  // The token bytes grammars are matched against, built on the first constrained request.
  std::shared_ptr<const TokenVocabulary> grammar_vocab();
  Status check_grammar_budget(const RequestParams& p);
  // RequestParams::stop_repeated_tool_calls: when the text ends a call, its repeat becomes a stop string.
  static void stop_at_repeat_of_last_call(TextStream& text);
  std::shared_ptr<const TokenVocabulary> grammar_vocab_;
  bool in_step_ = false;
  bool in_deferred_ = false;  // running the work a step deferred
  std::vector<std::function<void()>> deferred_;
  BlendQueue blends_;
  SegmentStore segments_;
  Status step_batch();
  void flush_blends();  // cached: the tokenizer builds the list on each call
  EngineMetrics m_;
  // A dense copy of a retained snapshot, rebuilt if it is compact; nullptr if unknown or the pool is short.
  std::shared_ptr<KvSequence> dense_retained(uint64_t handle, Error* error);
  // The compact snapshot a request resumes in attention (EngineOptions::resume_in_attention), or nullptr.
  const CompactContext* read_in_attention(uint64_t handle) const;
  // Stores `kept` (holes where `diffs` stand) as the compact snapshot `handle`.
  void store_compact(uint64_t handle, std::shared_ptr<const KvSequence> kept, std::vector<PlacedSegmentDiff> diffs);
  std::map<uint64_t, std::shared_ptr<KvSequence>> retained_;
  std::set<uint64_t> transient_;  // retained_ handles marked by mark_transient
  std::map<uint64_t, std::shared_ptr<const CompactContext>> compact_;
  uint64_t next_retained_ = 0;
};

}  // namespace agentkv
