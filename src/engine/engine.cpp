#include "engine/engine.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <unordered_set>

#include "tokenizer/chat_tools.h"
#include "util/monotonic_clock.h"

namespace agentkv {

namespace {

// The longest sequence an engine runs: the options' n_ctx capped at, or by default, the training context.
int engine_n_ctx(const ModelConfig& c, const EngineOptions& opt) {
  return opt.n_ctx > 0 ? std::min(opt.n_ctx, c.n_ctx_train) : c.n_ctx_train;
}

// log-softmax of the raw logits (before penalties and temperature), as OpenAI reports logprobs.
TokenLogprob logprobs_of(const float* logits, int32_t n_vocab, int32_t chosen, int top) {
  float mx = -std::numeric_limits<float>::infinity();
  for (int32_t i = 0; i < n_vocab; ++i) mx = std::max(mx, logits[i]);
  double sum = 0;
  for (int32_t i = 0; i < n_vocab; ++i) sum += std::exp(double(logits[i]) - mx);
  const float log_z = float(mx + std::log(sum));
  TokenLogprob lp;
  lp.token = chosen;
  lp.logprob = logits[chosen] - log_z;
  if (top > 0) {
    std::vector<std::pair<float, int32_t>> best;
    best.reserve(size_t(top) + 1);
    for (int32_t i = 0; i < n_vocab; ++i) {
      if (int(best.size()) == top && logits[i] <= best.back().first) continue;
      auto pos = std::find_if(best.begin(), best.end(), [&](const auto& b) { return logits[i] > b.first; });
      best.insert(pos, {logits[i], i});
      if (int(best.size()) > top) best.pop_back();
    }
    for (auto& [v, id] : best) lp.top.emplace_back(id, v - log_z);
  }
  return lp;
}

}  // namespace

Result<std::unique_ptr<Engine>> Engine::create(const LoadedModel& model, const EngineOptions& opt, ThreadPool& pool) {
  if (opt.scheduler.max_batch_tokens < 1) return make_error("max batch tokens must be >= 1");
  if (opt.scheduler.max_running < 1) return make_error("max running sequences must be >= 1");
  if (opt.n_ctx < 0) return make_error("n_ctx must be >= 0");
  const ModelConfig& c = model.config();
  const int n_ctx = engine_n_ctx(c, opt);
  if (c.longrope && rope_uses_long_factors(c, n_ctx) != rope_uses_long_factors(c, c.n_ctx_seq))
    return make_error("the model was loaded for a context of " + std::to_string(c.n_ctx_seq) +
                      " tokens per sequence, which picks other LongRoPE factors than this engine's " +
                      std::to_string(n_ctx) + " (original context " + std::to_string(c.rope_orig_ctx) +
                      "): load it for this context (fit_model_to_context)");
  std::unique_ptr<KvManager> kv;
  AGENTKV_ASSIGN_OR_RETURN(kv, KvManager::create(model.config(), model.fingerprint, opt.kv));
  return std::unique_ptr<Engine>(new Engine(model, opt, pool, std::move(kv)));
}

Engine::Engine(const LoadedModel& model, const EngineOptions& opt, ThreadPool& pool, std::unique_ptr<KvManager> kv)
    : lm_(model),
      opt_(opt),
      pool_(pool),
      kv_(std::move(kv)),
      scheduler_(*kv_, opt.scheduler),
      n_ctx_(engine_n_ctx(model.config(), opt)),
      eog_ids_(model.tokenizer->eog_ids()) {
  scheduler_.set_reclaim([this] { return segments_.evict_lru(); });
}

Engine::~Engine() {
  // Sequences release their blocks in their destructors; the manager must outlive them.
  requests_.clear();
  segments_.clear();
  retained_.clear();
  compact_.clear();
}

const char* master_context_name(MasterContext c) { return c == MasterContext::kAgent ? "agent" : "block"; }

Result<MasterContext> parse_master_context(std::string_view text) {
  if (text == "block") return MasterContext::kBlock;
  if (text == "agent") return MasterContext::kAgent;
  return make_error("'" + std::string(text) + "' is not a master context (choose block or agent)");
}

Status check_context(int64_t tokens, int n_ctx, const std::string& what, int64_t reserve) {
  if (tokens + reserve <= int64_t(n_ctx)) return {};
  return make_error(ErrorCode::kTooLarge, what + " has " + std::to_string(tokens) + " tokens; the model's context is " +
                                              std::to_string(n_ctx));
}

Status Engine::validate(const RequestParams& p) const {
  if (p.prompt.empty()) return make_error("prompt is empty");
  const int32_t n_vocab = lm_.config().n_vocab;
  for (int32_t t : p.prompt)
    if (t < 0 || t >= n_vocab)
      return make_error("prompt token id " + std::to_string(t) + " out of range [0, " + std::to_string(n_vocab) + ")");
  AGENTKV_TRY(check_context(int64_t(p.prompt.size()), n_ctx_, "the prompt"));
  if (p.max_tokens < 0) return make_error("max_tokens must be >= 0");
  if (p.min_tokens < 0 || p.min_tokens > p.max_tokens) return make_error("min_tokens must be in [0, max_tokens]");
  if (p.n < 1 || p.n > opt_.max_n) return make_error("n must be in [1, " + std::to_string(opt_.max_n) + "]");
  if (p.top_logprobs < -1 || p.top_logprobs > opt_.max_top_logprobs)
    return make_error("top_logprobs must be in [0, " + std::to_string(opt_.max_top_logprobs) + "]");
  AGENTKV_TRY(p.sampling.validate());
  for (const auto& [t, bias] : p.sampling.logit_bias)
    if (t >= n_vocab)
      return make_error("logit_bias token id " + std::to_string(t) + " out of range [0, " + std::to_string(n_vocab) + ")");
  // The request must fit the KV budget on its own, or it could never finish (preemption frees
  // other sequences' blocks, not the request's own). Pins are the engine thread's: check_admission.
  const int64_t tokens = std::min<int64_t>(int64_t(p.prompt.size()) + p.max_tokens, n_ctx_);
  const KvDemand d{worst_case_blocks(int64_t(p.prompt.size()), p.max_tokens, p.n, n_ctx_, kv_->block_size()), 0, tokens};
  return check_kv_fit(d, KvBudget{kv_->pool().n_blocks(), 0, kv_->block_size()}, "the request");
}

KvBudget Engine::kv_budget() const {
  // Every reference a scheduled sequence, the (reclaimable) segment cache, a transient snapshot or a
  // blend in flight holds is unpinned; what is left of a block's reference count is a resident
  // context's pin. A sequence holds one reference per block however many hold it: each counts once.
  std::vector<int32_t> refs(size_t(kv_->pool().n_blocks()), 0);
  std::unordered_set<const KvSequence*> counted;
  auto count = [&](const KvSequence& s) {
    if (!counted.insert(&s).second) return;
    for (int32_t b : s.blocks())
      if (b != KvSequence::kHole) ++refs[size_t(b)];
  };
  for (const auto& [id, r] : requests_)
    for (const auto& seq : r.seqs) count(seq->kv);
  segments_.add_block_refs(refs);
  for (uint64_t h : transient_)
    if (auto it = retained_.find(h); it != retained_.end()) count(*it->second);
  blends_.for_each_held(count);
  return KvBudget{kv_->pool().n_blocks(), count_pinned_blocks(kv_->pool(), refs), kv_->block_size()};
}

KvDemand Engine::kv_demand(const RequestParams& p) const {
  const int64_t n_prompt = int64_t(p.prompt.size());
  KvDemand d;
  d.need_blocks = worst_case_blocks(n_prompt, p.max_tokens, p.n, n_ctx_, kv_->block_size());
  d.tokens = std::min<int64_t>(n_prompt + p.max_tokens, n_ctx_);
  // The full blocks of a dense kv_from that the prompt starts with are pinned already and shared
  // (a compact one is rebuilt as a copy: counted in full; unless it is resumed in attention, where its
  // holes need no block either).
  const KvSequence* from = retained(p.kv_from);
  if (const CompactContext* c = read_in_attention(p.kv_from)) from = c->kept().get();
  if (from) {
    const std::vector<int32_t>& have = from->tokens();
    const size_t limit = std::min(have.size(), p.prompt.empty() ? 0 : p.prompt.size() - 1);
    size_t common = 0;
    while (common < limit && have[common] == p.prompt[common]) ++common;
    d.reused_blocks = int64_t(common) / kv_->block_size();
  }
  return d;
}

Status Engine::check_admission(const KvDemand& d, const std::string& what) const {
  return check_kv_fit(d, kv_budget(), what);
}

std::unique_ptr<Sequence> Engine::make_sequence(const RequestState& r, uint64_t id, int index, uint64_t arrival) {
  auto s = std::make_unique<Sequence>(*kv_, r.params.cache_salt);
  s->request_id = id;
  s->index = index;
  s->arrival = arrival;
  SamplingParams sp = r.params.sampling;
  sp.seed += uint64_t(index);  // n samples of one seeded request differ, and are reproducible
  s->sampler = std::make_unique<Sampler>(sp, sp.grammar ? grammar_vocab() : nullptr);
  s->text = std::make_unique<TextStream>(*lm_.tokenizer, r.params.stop);
  return s;
}

Result<uint64_t> Engine::add_request(RequestParams p, RequestCallback cb) {
  const uint64_t id = next_request_id();
  AGENTKV_TRY(add_request_with_id(id, std::move(p), std::move(cb)));
  return id;
}

Status Engine::add_request_with_id(uint64_t id, RequestParams p, RequestCallback cb) {
  AGENTKV_TRY(validate(p));
  AGENTKV_TRY(check_grammar_budget(p));
  AGENTKV_TRY(check_admission(kv_demand(p), "the request"));
  if (requests_.count(id)) return make_error(ErrorCode::kInternal, "request id " + std::to_string(id) + " is already in use");
  std::shared_ptr<const KvSequence> resume;
  std::vector<PlacedSegmentDiff> resume_diffs;
  if (const CompactContext* c = read_in_attention(p.kv_from)) {
    resume = c->kept();
    resume_diffs = c->diffs();
  } else if (p.kv_from) {
    Error error;
    resume = dense_retained(p.kv_from, &error);
    if (!resume) return error;
  }
  RequestState& r = requests_[id];
  r.params = std::move(p);
  r.cb = std::move(cb);
  r.arrival_time = monotonic_seconds();
  auto s = make_sequence(r, id, 0, next_arrival_++);
  s->tokens = r.params.prompt;
  s->n_prompt = int(s->tokens.size());
  s->resume = std::move(resume);
  s->resume_diffs = std::move(resume_diffs);
  scheduler_.add_waiting(s.get());
  r.seqs.push_back(std::move(s));
  ++m_.requests_added;
  if (r.params.announce_admission) {
    RequestEvent ev;
    ev.request_id = id;
    ev.n_prompt = int(r.params.prompt.size());
    r.cb(ev);
  }
  return {};
}

void Engine::finish_sequence(RequestState& r, Sequence* s, RequestEvent& ev, FinishReason reason) {
  ev.text += s->text->finish();
  ev.seq_finished = true;
  ev.finish_reason = reason;
  if (r.params.retain_kv && s->index == 0 && (reason == FinishReason::kStop || reason == FinishReason::kLength)) {
    // The snapshot takes the blocks over (the last sampled token has no K/V yet and is not in it).
    const uint64_t h = ++next_retained_;
    auto snap = std::make_shared<KvSequence>(std::move(s->kv));
    ev.retained_kv = h;
    ev.retained_tokens = snap->n_tokens();
    if (s->diffs.empty())
      retained_.emplace(h, std::move(snap));
    else  // resumed in attention: it stays in master–diff form
      store_compact(h, std::move(snap), s->diffs);
    if (r.params.retain_transient) mark_transient(h);
  }
  scheduler_.remove(s);  // blocks go back at once
  s->state = Sequence::State::kFinished;
  ++r.n_finished;
  // The fork adds the other n-1 sequences before sequence 0 samples, so "all of r.seqs" is right
  // both before and after it.
  ev.request_finished = size_t(r.n_finished) == r.seqs.size();
  if (ev.request_finished && reason != FinishReason::kCancelled && reason != FinishReason::kError) ++m_.requests_finished;
}

void Engine::sample_and_emit(RequestState& r, Sequence* s, float* logits) {
  const int32_t n_vocab = lm_.config().n_vocab;
  RequestEvent ev;
  ev.request_id = s->request_id;
  ev.seq_index = s->index;
  ev.n_prompt = s->n_prompt;
  ev.n_cached_prompt = std::max(0, r.seqs.front()->n_cached_prompt);
  const double now = monotonic_seconds();
  if (r.params.max_tokens == 0) {
    ev.n_generated = 0;
    finish_sequence(r, s, ev, FinishReason::kLength);
    if (r.cb) r.cb(ev);
    if (ev.request_finished) finished_ids_.push_back(s->request_id);
    return;
  }
  const bool block_eog = r.params.ignore_eos || s->n_generated < r.params.min_tokens;
  if (block_eog)
    for (int32_t e : eog_ids_)
      if (e >= 0 && e < n_vocab) logits[e] = -std::numeric_limits<float>::infinity();
  if (r.params.top_logprobs >= 0) {
    // Logprobs describe the model's distribution, so they are taken before penalties / temperature.
    scratch_logits_.assign(logits, logits + n_vocab);
  }
  const double grammar_before = s->sampler->grammar_seconds();
  const int64_t tokens_left =
      std::min<int64_t>(r.params.max_tokens - s->n_generated, n_ctx_ - int64_t(s->tokens.size()));
  const int32_t tok = s->sampler->sample(logits, n_vocab, s->tokens, tokens_left);
  if (s->sampler->grammar()) {
    m_.grammar_seconds += s->sampler->grammar_seconds() - grammar_before;
    ++m_.grammar_tokens;
  }
  if (tok < 0) {
    // Only a grammar refuses every token (none of the vocabulary continues it): the answer so far
    // is a prefix of a valid one, but nothing valid can follow, so it is an error, not a stop.
    const GrammarMatcher* g = s->sampler->grammar();
    ev.error = g && g->overflowed()
                   ? "the grammar of the response format is too ambiguous to follow (over " +
                         std::to_string(GrammarMatcher::kMaxStacksPerState) + " alternatives at once) after " +
                         std::to_string(s->n_generated) + " generated tokens; simplify the schema or pattern"
                   : "the grammar of the response format allows no token after " + std::to_string(s->n_generated) +
                         " generated tokens";
    ev.error_code = ErrorCode::kInternal;
    ev.n_generated = s->n_generated;
    finish_sequence(r, s, ev, FinishReason::kError);
    if (r.cb) r.cb(ev);
    if (ev.request_finished) finished_ids_.push_back(s->request_id);
    return;
  }
  ev.has_token = true;
  ev.token = tok;
  if (r.params.top_logprobs >= 0) ev.logprob = logprobs_of(scratch_logits_.data(), n_vocab, tok, r.params.top_logprobs);
  if (!r.first_token_seen) {
    r.first_token_seen = true;
    m_.ttft.observe(now - r.arrival_time);
  } else if (s->n_generated > 0) {
    m_.inter_token.observe(now - s->last_token_time);
  }
  s->last_token_time = now;
  ++m_.tokens_decoded;
  if (!block_eog && lm_.tokenizer->is_eog(tok)) {
    ev.eog = true;
    ev.n_generated = s->n_generated;
    finish_sequence(r, s, ev, FinishReason::kStop);
  } else {
    s->tokens.push_back(tok);
    ++s->n_generated;
    ev.n_generated = s->n_generated;
    ev.text = s->text->push(tok);
    if (r.params.stop_repeated_tool_calls && !s->text->stopped()) stop_at_repeat_of_last_call(*s->text);
    if (s->text->stopped() || s->sampler->grammar_done())  // a stop string, or the structured value is whole
      finish_sequence(r, s, ev, FinishReason::kStop);
    else if (s->n_generated >= r.params.max_tokens || int64_t(s->tokens.size()) >= n_ctx_)
      // A structured answer that is whole when the budget ends was not cut: it stops (it could only
      // have gone on, like a number's further digits, not become valid).
      finish_sequence(r, s, ev, s->sampler->grammar() && s->sampler->grammar()->complete() ? FinishReason::kStop
                                                                                           : FinishReason::kLength);
  }
  if (r.cb) r.cb(ev);
  if (ev.request_finished) finished_ids_.push_back(s->request_id);
}

void Engine::on_logits(Sequence* s, const float* row) {
  RequestState& r = requests_.at(s->request_id);
  const int32_t n_vocab = lm_.config().n_vocab;
  std::vector<Sequence*> targets{s};
  if (r.params.n > 1 && !r.forked && r.params.max_tokens > 0) {
    // The prompt was prefilled once; the other n-1 samples share its blocks (the partly filled
    // last block is copied when each writes its first token).
    r.forked = true;
    for (int i = 1; i < r.params.n; ++i) {
      auto child = make_sequence(r, s->request_id, i, s->arrival);
      child->kv = s->kv.fork();
      child->diffs = s->diffs;
      child->tokens = s->tokens;
      child->n_prompt = s->n_prompt;
      child->n_cached_prompt = s->n_cached_prompt;
      scheduler_.add_running(child.get());
      targets.push_back(child.get());
      r.seqs.push_back(std::move(child));
    }
  }
  std::vector<float> row_copy;
  for (Sequence* t : targets) {
    row_copy.assign(row, row + n_vocab);
    sample_and_emit(r, t, row_copy.data());
  }
}

void Engine::stop_at_repeat_of_last_call(TextStream& text) {
  const std::string& t = text.text();
  if (t.size() < kToolCallClose.size() || t.compare(t.size() - kToolCallClose.size(), kToolCallClose.size(), kToolCallClose) != 0)
    return;
  const size_t open = t.rfind(kToolCallOpen);
  if (open != std::string::npos) text.add_stop(std::string(kToolCallSeparator) + t.substr(open));
}

Status Engine::check_grammar_budget(const RequestParams& p) {
  // A response format whose shortest answer cannot fit max_tokens would fail at the first token
  // (the sampler allows only tokens after which the answer still closes in time): refuse it now.
  if (!p.sampling.grammar || p.max_tokens <= 0) return {};
  const int64_t tokens_left = std::min<int64_t>(p.max_tokens, n_ctx_ - int64_t(p.prompt.size()));
  GrammarMatcher g(p.sampling.grammar, grammar_vocab());
  // Every byte of the shortest answer has a token of its own, so an answer that short always fits;
  // past that, the sampler closes by the shortest answer's closing plan (its bytes in the fewest tokens).
  if (int64_t(g.min_completion()) <= tokens_left) return {};
  const uint32_t plan = g.min_completion_tokens();
  if (int64_t(plan) <= tokens_left) return {};
  return make_error("max_tokens " + std::to_string(p.max_tokens) +
                    " is too small for the response format or tool call: its shortest answer is " +
                    (plan < GrammarMatcher::kNoBudget ? std::to_string(plan) + " tokens (" : std::string("(")) +
                    std::to_string(g.min_completion()) + " bytes); allow at least that many tokens");
}

std::shared_ptr<const TokenVocabulary> Engine::grammar_vocab() {
  if (!grammar_vocab_) grammar_vocab_ = TokenVocabulary::build(*lm_.tokenizer);
  return grammar_vocab_;
}

void Engine::defer(std::function<void()> fn) {
  if (in_step_) {
    deferred_.push_back(std::move(fn));
    return;
  }
  fn();
}

Status Engine::step() {
  in_step_ = true;
  Status st = step_batch();
  in_step_ = false;
  // Work deferred by this step's callbacks; each may defer more (run at once now) or add requests.
  std::vector<std::function<void()>> work;
  work.swap(deferred_);
  in_deferred_ = true;
  for (auto& fn : work) fn();
  in_deferred_ = false;
  // Requests that reached a shared segment in this step are blended together.
  flush_blends();
  return st;
}

void Engine::flush_blends() {
  while (!blends_.empty()) {
    m_.segment_blend_steps += blends_.flush(*lm_.model, *kv_, pool_, [this] { return segments_.evict_lru(); });
  }
}

void Engine::queue_blend(PendingBlend blend) {
  blends_.add(std::move(blend));
  ++m_.segment_blends;
  if (in_step_ || in_deferred_) return;
  flush_blends();
}

void Engine::note_sharing(uint64_t lookups, uint64_t hit_tokens, uint64_t reused, uint64_t recomputed) {
  m_.segment_lookups += lookups;
  m_.segment_hit_tokens += hit_tokens;
  m_.tokens_reused_approx += reused;
  m_.tokens_recomputed += recomputed;
}

void Engine::note_transfer(uint64_t projected_tokens, uint64_t native_tokens, double native_seconds) {
  ++m_.transfers;
  m_.transferred_tokens += projected_tokens;
  // The receiver's own share of a transfer is prefill too (its rate estimates native prefill).
  m_.tokens_prefilled += native_tokens;
  m_.prefill_seconds += native_seconds;
}

Status Engine::step_batch() {
  std::vector<ScheduledChunk> chunks = scheduler_.schedule();
  ++m_.steps;
  if (chunks.empty()) {
    if (scheduler_.n_running() == 0 && scheduler_.n_waiting() > 0) {
      // Nothing runs and the head of the queue cannot get blocks: only blocks pinned outside the
      // scheduler since its admission could cause this; fail the request instead of spinning, with
      // the admission check's error when it now fails it.
      const uint64_t id = scheduler_.waiting().front()->request_id;
      Status st = check_admission(kv_demand(requests_.at(id).params), "the request");
      fail_request(id, st.ok() ? make_error(ErrorCode::kKvPinned, "not enough free KV blocks to admit the request")
                               : st.status_error());
    }
    for (uint64_t id : finished_ids_) requests_.erase(id);
    finished_ids_.clear();
    return {};
  }
  // Batch-invariant numerics: generated tokens (decode, or recomputed after a preemption) go first
  // and always take the decode kernels; prompt tokens follow and always take the prefill kernels.
  // A token's logits then do not depend on what else is batched with it, so batched, one-at-a-time,
  // prefix-cached and preempted runs generate the same tokens.
  batch_.clear();
  std::vector<int32_t> logit_row(chunks.size(), -1);
  for (const ScheduledChunk& c : chunks)
    batch_.seqs.push_back(SeqBlocks{c.seq->kv.blocks().data(), int32_t(c.seq->kv.blocks().size())});
  // Sequences resumed in attention read their diffs' runs from the masters (share/master_diff_attention.h).
  for (size_t ci = 0; ci < chunks.size(); ++ci) {
    Sequence* q = chunks[ci].seq;
    if (q->diffs.empty()) continue;
    if (!q->attention)
      q->attention = std::make_unique<MasterDiffAttention>(MasterDiffAttention::of(*lm_.model, q->kv, q->diffs));
    batch_.contexts.resize(chunks.size(), nullptr);
    batch_.contexts[ci] = q->attention.get();
  }
  for (int pass = 0; pass < 2; ++pass) {
    for (size_t ci = 0; ci < chunks.size(); ++ci) {
      const ScheduledChunk& c = chunks[ci];
      for (int64_t i = 0; i < c.n; ++i) {
        const int32_t pos = int32_t(c.start + i);
        if ((pos >= c.seq->n_prompt) != (pass == 0)) continue;
        const bool want = c.wants_logits && i + 1 == c.n;
        if (want) logit_row[ci] = int32_t(batch_.logit_rows.size());
        batch_.add(c.seq->tokens[size_t(pos)], pos, int32_t(ci), pos, want);
      }
    }
    if (pass == 0) batch_.n_tile_tokens = batch_.size();
  }
  int64_t n_decode = 0;
  int64_t n_prefill = 0;
  for (const ScheduledChunk& c : chunks) {
    if (c.n == 1 && c.start >= c.seq->n_prompt)
      ++n_decode;
    else
      n_prefill += c.n;
  }
  const int32_t n_vocab = lm_.config().n_vocab;
  logits_.resize(batch_.logit_rows.size() * size_t(n_vocab));
  const double t0 = monotonic_seconds();
  Status st = lm_.model->forward(batch_, kv_->arena(), logits_.data(), pool_);
  const double dt = monotonic_seconds() - t0;
  if (!st.ok()) return st;
  m_.forward_seconds += dt;
  m_.prefill_seconds += dt * double(n_prefill) / double(n_prefill + n_decode);
  m_.tokens_prefilled += uint64_t(n_prefill);
  for (const ScheduledChunk& c : chunks) {
    c.seq->kv.commit(std::span<const int32_t>(c.seq->tokens).subspan(size_t(c.start), size_t(c.n)));
  }
  for (size_t ci = 0; ci < chunks.size(); ++ci) {
    if (!chunks[ci].wants_logits) continue;
    on_logits(chunks[ci].seq, logits_.data() + size_t(logit_row[ci]) * size_t(n_vocab));
  }
  for (uint64_t id : finished_ids_) requests_.erase(id);
  finished_ids_.clear();
  return {};
}

Status Engine::run_until_idle() {
  while (has_work()) AGENTKV_TRY(step());
  return {};
}

void Engine::fail_request(uint64_t id, const Error& error) {
  auto it = requests_.find(id);
  if (it == requests_.end()) return;
  RequestState& r = it->second;
  ++m_.requests_failed;
  for (auto& s : r.seqs) {
    if (s->state == Sequence::State::kFinished) continue;
    scheduler_.remove(s.get());
    s->state = Sequence::State::kFinished;
  }
  RequestEvent ev;
  ev.request_id = id;
  ev.seq_finished = true;
  ev.request_finished = true;
  ev.finish_reason = FinishReason::kError;
  ev.error = error.message;
  ev.error_code = error.code;
  if (r.cb) r.cb(ev);
  finished_ids_.push_back(id);
}

void Engine::cancel(uint64_t id) {
  auto it = requests_.find(id);
  if (it == requests_.end()) return;
  RequestState& r = it->second;
  ++m_.requests_cancelled;
  std::vector<Sequence*> live;
  for (auto& s : r.seqs)
    if (s->state != Sequence::State::kFinished) live.push_back(s.get());
  for (size_t i = 0; i < live.size(); ++i) {
    Sequence* s = live[i];
    RequestEvent ev;
    ev.request_id = id;
    ev.seq_index = s->index;
    ev.n_prompt = s->n_prompt;
    ev.n_generated = s->n_generated;
    ev.text = s->text->finish();
    ev.seq_finished = true;
    ev.finish_reason = FinishReason::kCancelled;
    scheduler_.remove(s);
    s->state = Sequence::State::kFinished;
    ev.request_finished = i + 1 == live.size();
    if (r.cb) r.cb(ev);
  }
  requests_.erase(it);
}

EngineMetrics Engine::metrics() const {
  EngineMetrics m = m_;
  const ScheduleStats& ss = scheduler_.stats();
  m.preemptions = ss.preemptions;
  m.prefix_query_tokens = ss.prefix_query_tokens;
  m.prefix_hit_tokens = ss.prefix_hit_tokens;
  const BlockPoolStats ps = kv_->pool().stats();
  m.prefix_query_blocks = uint64_t(ps.lookups);
  m.prefix_hit_blocks = uint64_t(ps.hits);
  m.blocks_total = ps.n_blocks;
  m.blocks_used = ps.n_used;
  m.blocks_pinned = kv_budget().pinned_blocks;
  m.blocks_free = ps.n_free;
  m.blocks_cached = ps.n_cached;
  m.blocks_peak_used = ps.peak_used;
  m.bytes_per_block = kv_->bytes_per_block();
  if (const DiskTier* disk = kv_->disk_tier()) m.disk_tier = disk->stats();
  if (const RedisTier* redis = kv_->redis_tier()) {
    m.redis_tier = redis->stats();
    m.redis_segments = redis->segment_stats();
  }
  m.requests_running = int64_t(scheduler_.n_running());
  m.requests_waiting = int64_t(scheduler_.n_waiting());
  m.retained_snapshots = int64_t(retained_.size() + compact_.size());
  for (const auto& [h, snap] : retained_) m.retained_tokens += snap->n_tokens();
  for (const auto& [h, c] : compact_) {
    m.retained_tokens += c->n_tokens();
    m.retained_compact_blocks += c->own_blocks();
    m.retained_diff_blocks += c->diff_blocks();
    m.retained_diff_bytes += c->diff_payload_bytes();
  }
  m.retained_compact = int64_t(compact_.size());
  m.segment_contexts = int64_t(segments_.n_contexts());
  m.segment_blocks = segments_.n_blocks();
  m.segment_compact = int64_t(segments_.n_compact());
  m.segment_diff_blocks = segments_.n_diff_blocks();
  return m;
}

std::shared_ptr<KvSequence> Engine::dense_retained(uint64_t handle, Error* error) {
  if (auto it = retained_.find(handle); it != retained_.end()) return it->second;
  auto c = compact_.find(handle);
  if (c == compact_.end()) {
    *error = make_error(ErrorCode::kNotFound, "retained KV " + std::to_string(handle) + " does not exist");
    return nullptr;
  }
  auto dense = c->second->expand(*lm_.model, pool_);
  if (!dense) {
    *error = make_error(ErrorCode::kResourceExhausted,
                        "the KV budget cannot hold the context restored from master–diff storage (raise --kv-mem)");
    return nullptr;
  }
  return std::make_shared<KvSequence>(std::move(*dense));
}

uint64_t Engine::fork_retained(uint64_t handle) {
  Error error;
  auto src = dense_retained(handle, &error);
  if (!src) return 0;
  const uint64_t h = ++next_retained_;
  retained_.emplace(h, std::make_shared<KvSequence>(src->fork()));
  return h;
}

std::shared_ptr<const CompactContext> Engine::compact_context(uint64_t handle) const {
  auto it = compact_.find(handle);
  return it == compact_.end() ? nullptr : it->second;
}

const CompactContext* Engine::read_in_attention(uint64_t handle) const {
  if (!opt_.resume_in_attention) return nullptr;
  auto it = compact_.find(handle);
  return it == compact_.end() ? nullptr : it->second.get();
}

void Engine::store_compact(uint64_t handle, std::shared_ptr<const KvSequence> kept,
                           std::vector<PlacedSegmentDiff> diffs) {
  compact_.emplace(handle, std::make_shared<const CompactContext>(CompactContext::adopt(std::move(kept), std::move(diffs))));
}

uint64_t Engine::fork_context(uint64_t handle) {
  const CompactContext* c = read_in_attention(handle);
  if (!c) return fork_retained(handle);
  return adopt_compact(c->kept()->fork(), c->diffs());
}

uint64_t Engine::adopt_compact(KvSequence seq, std::vector<PlacedSegmentDiff> diffs) {
  const uint64_t h = ++next_retained_;
  store_compact(h, std::make_shared<const KvSequence>(std::move(seq)), std::move(diffs));
  return h;
}

std::vector<BlendedRun> Engine::echoes_before(const KvSequence& ctx, const std::vector<PlacedSegmentDiff>& earlier,
                                              int64_t seg_begin, const std::shared_ptr<const KvSequence>& master,
                                              int32_t master_start) const {
  if (!opt_.echo_keep) return {};
  // Only the context's own text after its last earlier diff: what it computed itself past its sharing
  // (the exact prefix before, which other contexts may share, is left as it is).
  int64_t from = -1;
  for (const PlacedSegmentDiff& d : earlier) {
    const int64_t end = d.first + d.second->master()->n_tokens();
    if (end <= seg_begin) from = std::max(from, end);
  }
  if (from < 0) return {};
  return find_echoes(ctx, std::max(from, ctx.approximate_from()), seg_begin, master, master_start, kv_->block_size(),
                     *opt_.echo_keep);
}

void Engine::note_echoes(const KvSequence& before, const CompactContext& after, const std::vector<BlendedRun>& echoes) {
  // An echo's whole blocks, dense before and holes now (compact() leaves a run it cannot drop as it was).
  const int bs = kv_->block_size();
  for (const BlendedRun& r : echoes) {
    const auto [first, last] = droppable_blocks(r.begin, r.n, bs);
    for (int64_t b = first; b < last; ++b)
      if (before.blocks()[size_t(b)] != KvSequence::kHole && after.kept()->blocks()[size_t(b)] == KvSequence::kHole)
        m_.echo_tokens += uint64_t(bs);
  }
}

bool Engine::compact_retained(uint64_t handle, int64_t seg_begin, uint64_t master, int32_t master_start,
                              uint64_t resumed_from, std::optional<DiffFormat> format) {
  const DiffFormat want = format.value_or(opt_.diff_format);
  auto mi = retained_.find(master);
  auto it = retained_.find(handle);
  auto ci = compact_.find(handle);
  if (mi == retained_.end() || (it == retained_.end() && ci == compact_.end())) return false;
  // The context's tokens: a dense snapshot's, or a compact one's (resumed in attention).
  const KvSequence& ctx = it != retained_.end() ? *it->second : *ci->second->kept();
  const int64_t seg_len = mi->second->n_tokens() - master_start;
  if (master_start < 0 || seg_len <= 0 || seg_begin < 0 || seg_begin + seg_len > ctx.n_tokens()) return false;
  // The segment's tokens must be the master's: anything else is a caller bug that would corrupt KV.
  if (!std::equal(ctx.tokens().begin() + seg_begin, ctx.tokens().begin() + seg_begin + seg_len,
                  mi->second->tokens().begin() + master_start))
    return false;
  // A context resumed in attention is compact already, its earlier runs holes: the new run is added,
  // the earlier diffs kept as they are.
  if (it == retained_.end()) {
    const std::shared_ptr<const CompactContext> was = ci->second;
    // Its diffs: the run's, when compacted already (e.g. the blended copy a turn resumed from in
    // attention; it starts at the run's first whole block, at or after seg_begin), and earlier ones. A
    // diff in another format than `want` is restored and encoded again in `want`, from the rows the turn
    // read (so a lossy record is encoded once): the run's always (a turn read it losslessly), an earlier
    // one when `want` is the engine's format (the context settling in it, e.g. after a compaction the
    // pool could not hold). A lossless compaction for a turn keeps the earlier lossy diffs as they are.
    const bool settle = want == opt_.diff_format;
    const int bs = kv_->block_size();
    bool has_run = false, run_restored = false;
    std::vector<const PlacedSegmentDiff*> restore;
    std::vector<PlacedSegmentDiff> inherited;  // kept as they are, or restored below (compact() encodes them)
    for (const PlacedSegmentDiff& d : was->diffs()) {
      const bool is_run = d.first < seg_begin + seg_len && seg_begin < d.first + d.second->master()->n_tokens();
      const bool restore_it = d.second->packed_rows()->codec().format() != want && (is_run || settle);
      if (restore_it) restore.push_back(&d);
      has_run |= is_run;
      run_restored |= is_run && restore_it;
      if (!(is_run && restore_it)) inherited.push_back(d);  // a restored run is compacted as the new run
    }
    const std::vector<BlendedRun> echoes = echoes_before(ctx, was->diffs(), seg_begin, mi->second, master_start);
    if (has_run && restore.empty() && echoes.empty()) return true;
    std::optional<KvSequence> restored;
    if (!restore.empty()) {
      restored.emplace(ctx.fork());
      for (const PlacedSegmentDiff* d : restore) {
        if (!restored->fill_holes(d->first / bs, (d->first + d->second->master()->n_tokens()) / bs)) return false;
        const KvSlotRange at{SeqBlocks{restored->blocks().data(), int32_t(restored->blocks().size())}, int32_t(d->first)};
        if (!d->second->materialize(*lm_.model, at, pool_).ok()) return false;
      }
    }
    std::vector<BlendedRun> runs;
    runs = echoes;
    if (!has_run || run_restored) runs.push_back(BlendedRun{seg_begin, seg_len, mi->second, master_start});
    auto c = CompactContext::compact(restored ? *restored : ctx, runs, *lm_.model, pool_, want, std::move(inherited));
    if (!c) return false;
    note_echoes(ctx, *c, echoes);
    ci->second = std::make_shared<const CompactContext>(std::move(*c));
    return true;
  }
  const KvSequence& dense = ctx;
  std::vector<CompactContext::PlacedDiff> inherited;
  if (auto from = compact_.find(resumed_from); resumed_from && from != compact_.end()) {
    const std::vector<int32_t>& a = from->second->kept()->tokens();
    const std::vector<int32_t>& b = dense.tokens();
    const size_t n = std::min(a.size(), b.size());
    const int64_t common = std::mismatch(a.begin(), a.begin() + int64_t(n), b.begin()).first - a.begin();
    inherited = from->second->diffs_within(std::min(common, seg_begin));
  }
  const std::vector<BlendedRun> echoes = echoes_before(dense, inherited, seg_begin, mi->second, master_start);
  std::vector<BlendedRun> runs = echoes;
  runs.push_back(BlendedRun{seg_begin, seg_len, mi->second, master_start});
  auto c = CompactContext::compact(dense, runs, *lm_.model, pool_, want, std::move(inherited));
  if (!c) return false;
  note_echoes(dense, *c, echoes);
  compact_.emplace(handle, std::make_shared<const CompactContext>(std::move(*c)));
  retained_.erase(it);
  return true;
}

uint64_t Engine::adopt_retained(KvSequence seq) {
  const uint64_t h = ++next_retained_;
  retained_.emplace(h, std::make_shared<KvSequence>(std::move(seq)));
  return h;
}

void Engine::mark_transient(uint64_t handle) {
  if (retained_.count(handle)) transient_.insert(handle);
}

void Engine::release_retained(uint64_t handle) {
  transient_.erase(handle);
  retained_.erase(handle);
  compact_.erase(handle);
}

std::shared_ptr<const KvSequence> Engine::take_retained(uint64_t handle) {
  auto it = retained_.find(handle);
  if (it == retained_.end()) return nullptr;
  std::shared_ptr<const KvSequence> out = std::move(it->second);
  retained_.erase(it);
  transient_.erase(handle);
  return out;
}

std::shared_ptr<const KvSequence> Engine::share_retained(uint64_t handle) const {
  auto it = retained_.find(handle);
  return it == retained_.end() ? nullptr : it->second;
}

const KvSequence* Engine::retained(uint64_t handle) const {
  auto it = retained_.find(handle);
  return it == retained_.end() ? nullptr : it->second.get();
}

int64_t Engine::publish_retained(uint64_t handle) {
  if (const KvSequence* s = retained(handle)) return kv_->publish_sequence(*s);
  return compact_.count(handle) ? 0 : -1;
}

}  // namespace agentkv
