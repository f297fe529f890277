// POST /v1/agents/{id}/score: the KV-PRM as a service (issue 7). Candidate next steps of a resident
// agent are scored from the agent's own cache: the context (chat with the assistant turn open, then
// the accepted prefix) resumes from the agent's resident KV through the engine, then on the engine
// thread every candidate is a fork of it with the step appended, all steps in one forward and all
// verify tokens in one more (prm/kv_scorer.h). Nothing is re-encoded, and the agent's resident
// context is never written: the forks and the context snapshot are dropped after scoring.
#include <cmath>
#include <future>

#include "prm/kv_scorer.h"
#include "kv/direct_prefill.h"
#include "server/agent_context.h"
#include "server/agent_job.h"
#include "util/monotonic_clock.h"

namespace agentkv {

namespace {

// Candidates per forward: bounds the activations of one pass (a step is tens of tokens).
constexpr size_t kStepsPerPass = 64;

struct ScoredSteps {
  prm::PrmScores scores;
  double seconds = 0;
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

}  // namespace

void ApiServer::score_agent_steps(const std::string& id, const HttpRequest& req, HttpResponseWriter& w) {
  auto reply = [&](const ApiError& e) { agents_http::reply(w, e); };
  auto body = agents_http::parse_body(req, w, false);
  if (!body) return;
  StepScoreRequest sr;
  if (auto e = parse_step_score(*body, opt_.limits, opt_.agent_limits, &sr)) return reply(*e);
  std::vector<Agent> as;
  if (auto e = agents_->acquire({id}, &as)) return reply(*e);
  Agent& a = as[0];
  auto fail = [&](const ApiError& e) {
    agents_->abandon(a.id);
    reply(e);
  };
  const Served& m = models_[a.model];
  if (!m.verify_head) return fail(api_error(ErrorCode::kInvalidArgument, "model '" + m.id + "' has no verifier: " + m.verifier_summary, "agent"));
  const prm::VerifyHead& head = *m.verify_head;
  const Tokenizer& tok = *m.lm->tokenizer;
  auto ctx = agent_context_tokens(tok, a.messages, a.segments, true);
  if (!ctx.ok()) return fail(api_error(ctx.code(), "agent '" + a.id + "': " + ctx.error(), "agent"));
  // Context text is data: no special-token parsing, as the agent's messages.
  const std::vector<int32_t> prefix = tok.encode(sr.prefix, false, false);
  ctx->insert(ctx->end(), prefix.begin(), prefix.end());
  std::vector<std::vector<int32_t>> steps;
  size_t longest = 0;
  for (const std::string& s : sr.steps) {
    // The verify question follows the step's newline, as in fitting (prm/verify_head.h).
    steps.push_back(tok.encode(s.back() == '\n' ? s : s + "\n", false, false));
    longest = std::max(longest, steps.back().size());
  }
  const size_t need = ctx->size() + longest + head.tokens.size();
  if (need > size_t(m.engine->n_ctx()))
    return fail(api_error(ErrorCode::kTooLarge, "agent '" + a.id + "': context " + std::to_string(ctx->size()) +
                                                    " + step " + std::to_string(longest) + " + verify " +
                                                    std::to_string(head.tokens.size()) +
                                                    " tokens exceed the model's context of " +
                                                    std::to_string(m.engine->n_ctx()),
                          "steps"));
  // 1. The context as a retained snapshot, resumed from the agent's resident KV (only what the
  //    resident context lacks is computed: the assistant's turn header and the prefix).
  std::vector<AgentJob> jobs(1);
  jobs[0].model = a.model;
  jobs[0].params.prompt = *ctx;
  jobs[0].params.max_tokens = 0;
  jobs[0].params.retain_kv = true;
  jobs[0].params.kv_from = a.kv;
  if (!run_jobs(jobs, w)) {
    agents_->abandon(a.id);
    return;
  }
  if (!jobs[0].error.empty() || !jobs[0].retained) {
    release_kv(a.model, jobs[0].retained);
    return fail(jobs[0].error.empty() ? api_error(ErrorCode::kInternal, "the context was not kept")
                                      : api_error(jobs[0].error_code, jobs[0].error));
  }
  // 2. The steps and the verifier, on the engine thread (the only thread that touches the KV).
  auto done = std::make_shared<std::promise<Result<ScoredSteps>>>();
  auto fut = done->get_future();
  const uint64_t base = jobs[0].retained;
  const prm::VerifyHead* hp = &head;  // lives as long as the server
  auto shared_steps = std::make_shared<std::vector<std::vector<int32_t>>>(std::move(steps));
  if (!loop_->post([done, base, shared_steps, hp](Engine& e) { done->set_value(score_on_engine(e, base, *shared_steps, *hp)); },
                   a.model))
    return fail(api_error(ErrorCode::kUnavailable, "the server is shutting down"));
  auto scored = fut.get();
  a.expires_at = unix_seconds() + a.ttl_s;
  agents_->finish(a);
  if (!scored.ok()) return reply(api_error(scored.code(), "scoring failed: " + scored.error()));
  StepScoreReply rep;
  rep.agent = a.id;
  rep.verifier = head.probe ? "probe" : "zero-shot";
  rep.feature_layer = head.probe ? head.feature_layer : 0;
  rep.context_tokens = int64_t(ctx->size());
  rep.cached_tokens = jobs[0].usage.cached_tokens;
  rep.seconds = scored->seconds;
  for (size_t i = 0; i < shared_steps->size(); ++i) {
    StepScore s;
    s.score = scored->scores.score[i];
    s.probability = 1.0 / (1.0 + std::exp(-s.score));
    s.logodds = scored->scores.logodds[i];
    s.tokens = int64_t((*shared_steps)[i].size());
    rep.scores.push_back(s);
  }
  w.respond(200, "application/json", dump_json(step_scores_json(rep)));
}

}  // namespace agentkv
