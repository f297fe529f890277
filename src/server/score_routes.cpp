// POST /v1/agents/{id}/score: the KV-PRM as a service (issue 7). Candidate next steps of a resident
// agent are scored from the agent's own cache, as ONE engine job: the context (chat with the assistant
// turn open, then the accepted prefix) resumes from the agent's resident KV through the engine, then
// on the engine thread every candidate is a fork of it with the step appended, all steps in one
// forward and all verify tokens in one more (prm/kv_scorer.h). Nothing is re-encoded, and the agent's
// resident context is never written: the forks and the context snapshot are dropped after scoring.
#include <algorithm>
#include <cmath>

#include "engine/request_outcome.h"
#include "kv/direct_prefill.h"
#include "prm/kv_scorer.h"
#include "server/error_status.h"
#include "server/mailbox.h"
#include "server/routes.h"
#include "server/turn_builder.h"
#include "util/monotonic_clock.h"

namespace agentkv {

namespace {

// Candidates per forward: bounds the activations of one pass (a step is tens of tokens).
constexpr size_t kStepsPerPass = 64;

struct ScoredSteps {
  prm::PrmScores scores;
  double seconds = 0;
  int cached_tokens = 0;  // of the context, from the agent's resident KV
};

// Engine thread. `base` is a retained snapshot of the context; it is released here.
Result<ScoredSteps> score_on_engine(Engine& e, uint64_t base, const std::vector<std::vector<int32_t>>& steps,
                                    const prm::VerifyHead& head) {
  const double t0 = monotonic_seconds();
  const KvSequence* ctx = e.retained(base);
  if (!ctx) {
    e.release_retained(base);
    return make_error(ErrorCode::kInternal, "the agent's context snapshot is gone");
  }
  const Model& model = *e.model().model;
  ScoredSteps out;
  Status st;
  for (size_t first = 0; first < steps.size() && st.ok(); first += kStepsPerPass) {
    const size_t last = std::min(steps.size(), first + kStepsPerPass);
    std::vector<KvSequence> forks;
    forks.reserve(last - first);  // prefill_together points into the forks' block tables
    std::vector<KvSequence*> seqs;
    std::vector<std::span<const int32_t>> tokens;
    for (size_t i = first; i < last; ++i) {
      forks.push_back(ctx->fork());
      seqs.push_back(&forks.back());
      tokens.emplace_back(steps[i]);
    }
    st = prefill_together(model, e.kv(), seqs, tokens, e.pool());
    if (!st.ok()) break;
    std::vector<const KvSequence*> contexts(seqs.begin(), seqs.end());
    auto scored = prm::kv_prm_score(model, e.kv(), contexts, head, e.pool());
    if (!scored.ok()) {
      st = scored.status_error();
      break;
    }
    auto& s = out.scores;
    s.logodds.insert(s.logodds.end(), scored->logodds.begin(), scored->logodds.end());
    s.score.insert(s.score.end(), scored->score.begin(), scored->score.end());
    // The forks go out of scope here: their private blocks (the step, the verify tokens) return.
  }
  e.release_retained(base);
  if (!st.ok()) return st.status_error();
  out.seconds = monotonic_seconds() - t0;
  return out;
}

// The whole protocol as one job: the context resumes from the agent's resident KV as a request that
// keeps it (only what the resident context lacks is computed: the assistant's turn header and the
// prefix), and its completion callback, on the engine thread, scores the steps from that snapshot.
std::optional<Result<ScoredSteps>> score_job(EngineLoop& loop, size_t model, Engine* engine, RequestParams p,
                                             std::vector<std::vector<int32_t>> steps, const prm::VerifyHead* head,
                                             HttpResponseWriter& w) {
  auto box = std::make_shared<Mailbox<Result<ScoredSteps>>>();
  auto outcome = std::make_shared<RequestOutcome>();  // the engine thread's alone
  auto shared_steps = std::make_shared<std::vector<std::vector<int32_t>>>(std::move(steps));
  // Admission before work (engine/kv_admission.h): the context and one pass of forks (each its step
  // and the verify tokens, plus a copied partial block) must fit the unpinned KV, checked on the engine
  // thread before the context is computed.
  if (Status st = engine->validate(p); !st.ok()) return Result<ScoredSteps>(st.status_error());
  size_t longest = 0;
  for (const auto& st : *shared_steps) longest = std::max(longest, st.size());
  const int64_t bs = engine->kv().block_size(), per_fork = int64_t(longest + head->tokens.size());
  KvDemand forks{int64_t(std::min(shared_steps->size(), kStepsPerPass)) * ((per_fork + bs - 1) / bs + 1), 0,
                 int64_t(std::min(shared_steps->size(), kStepsPerPass)) * per_fork};
  const uint64_t rid = engine->next_request_id();
  auto on_event = [box, outcome, shared_steps, engine, head, &loop, model](const RequestEvent& ev) {
    fold(*outcome, ev);
    if (!ev.request_finished) return;
    loop.publish_metrics(model);
    if (outcome->error || !outcome->retained_kv) {
      if (outcome->retained_kv) engine->release_retained(outcome->retained_kv);
      return box->put(outcome->error ? *outcome->error : Error{ErrorCode::kCancelled, "the context was not kept"});
    }
    auto scored = score_on_engine(*engine, outcome->retained_kv, *shared_steps, *head);
    if (scored.ok()) scored->cached_tokens = outcome->n_cached_prompt;
    box->put(std::move(scored));
  };
  const bool posted = loop.post(
      [box, rid, forks, p = std::move(p), on_event = std::move(on_event)](Engine& e) mutable {
        KvDemand d = e.kv_demand(p);
        d.need_blocks += forks.need_blocks;
        d.tokens += forks.tokens;
        Status st = e.check_admission(d, "the scoring (its context and a pass of candidate steps)");
        if (st.ok()) st = e.add_request_with_id(rid, std::move(p), std::move(on_event));
        if (!st.ok()) box->put(st.status_error());
      },
      model);
  if (!posted) return Result<ScoredSteps>(Error{ErrorCode::kUnavailable, "the engine is shutting down"});
  return box->result(w, [&] { loop.cancel(rid, model); });
}

}  // namespace

void handle_score(ServerState& s, const std::string& id, const HttpRequest& req, HttpResponseWriter& w) {
  auto body = parse_body(req, w, false);
  if (!body) return;
  StepScoreRequest sr;
  if (auto e = parse_step_score(*body, s.opt.limits, s.opt.agent_limits, &sr)) return reply(w, *e);
  std::vector<Agent> as;
  if (auto e = s.agents->acquire({id}, &as)) return reply(w, *e);
  Agent& a = as[0];
  auto fail = [&](const ApiError& e) {
    s.agents->abandon(a.id);
    reply(w, e);
  };
  const ServedModel& m = s.models[a.model];
  if (!m.verify_head)
    return fail(api_error(ErrorCode::kInvalidArgument, "model '" + m.id + "' has no verifier: " + m.verifier_summary, "agent"));
  const prm::VerifyHead& head = *m.verify_head;
  const Tokenizer& tok = *m.lm->tokenizer;
  // The agent's turn (its context, resumed from its resident KV, kept as a snapshot), computed only.
  AgentTurn turn;
  if (auto e = build_turn(a, tok, m.engine->n_ctx(), SamplingFields{}, s.opt.limits, &turn)) {
    e->param = "agent";
    return fail(*e);
  }
  std::vector<int32_t>& ctx = turn.params.prompt;
  // Context text is data: no special-token parsing, as the agent's messages.
  const std::vector<int32_t> prefix = tok.encode(sr.prefix, false, false);
  ctx.insert(ctx.end(), prefix.begin(), prefix.end());
  turn.params.max_tokens = 0;
  std::vector<std::vector<int32_t>> steps;
  size_t longest = 0;
  for (const std::string& step : sr.steps) {
    // The verify question follows the step's newline, as in fitting (prm/verify_head.h).
    steps.push_back(tok.encode(step.back() == '\n' ? step : step + "\n", false, false));
    longest = std::max(longest, steps.back().size());
  }
  const int64_t need = int64_t(ctx.size() + longest + head.tokens.size());
  if (Status st = check_context(need, m.engine->n_ctx(),
                                "the longest step's sequence (context " + std::to_string(ctx.size()) + " + step " +
                                    std::to_string(longest) + " + verify " + std::to_string(head.tokens.size()) + ")",
                                0);
      !st.ok())
    return fail(api_error(st.status_error(), "steps"));
  const int64_t context_tokens = int64_t(ctx.size());
  std::vector<int64_t> step_tokens;
  for (const auto& st : steps) step_tokens.push_back(int64_t(st.size()));
  auto scored = score_job(*s.loop, a.model, m.engine.get(), std::move(turn.params), std::move(steps), &head, w);
  if (!scored) {  // the client went away
    s.agents->abandon(a.id);
    return;
  }
  a.expires_at = unix_seconds() + a.ttl_s;
  s.agents->finish(a);
  if (!scored->ok()) return reply(w, api_error(scored->code(), "scoring failed: " + scored->error()));
  StepScoreReply rep;
  rep.agent = a.id;
  rep.verifier = prm::verifier_kind(head);
  rep.feature_layer = head.probe ? head.feature_layer : 0;
  rep.context_tokens = context_tokens;
  rep.cached_tokens = (*scored)->cached_tokens;
  rep.seconds = (*scored)->seconds;
  for (size_t i = 0; i < step_tokens.size(); ++i) {
    StepScore sc;
    sc.score = (*scored)->scores.score[i];
    sc.probability = 1.0 / (1.0 + std::exp(-sc.score));
    sc.logodds = (*scored)->scores.logodds[i];
    sc.tokens = step_tokens[i];
    rep.scores.push_back(sc);
  }
  w.respond(200, "application/json", dump_json(step_scores_json(rep)));
}

}  // namespace agentkv
