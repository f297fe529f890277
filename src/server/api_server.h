// agentkv serve: the OpenAI-compatible API over the engines of one or more models. HTTP threads only
// parse, validate, enqueue and wait on a per-request mailbox; the one engine thread (EngineLoop)
// runs every model's engine.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "engine/engine.h"
#include "engine/engine_loop.h"
#include "prm/verify_head.h"
#include "server/agent_registry.h"
#include "server/agents_protocol.h"
#include "server/http_server.h"
#include "server/openai_protocol.h"

namespace agentkv {

struct ServeOptions {
  std::string host = "127.0.0.1";
  int port = 8080;
  std::string api_key;          // empty: no authentication
  int64_t kv_mem = 0;           // per model; 0: the default share of RAM split between the models
  int block_size = 16;
  int threads = 0;
  size_t max_body_bytes = size_t(8) << 20;
  ApiLimits limits;
  AgentLimits agent_limits;
  // Collective KV sharing of a round's shared block (TokenDance, issue 5): whether rounds use it
  // (each request can still turn it off), and the share of the block recomputed per agent.
  bool round_sharing = true;
  double recompute = 0.15;
  // Run once per model at start-up when round_sharing is on: the quality gate. It returns whether
  // approximate sharing is allowed on that model (and a line saying what was measured); a model that
  // fails runs every round exactly. Unset: allowed without a check (library use, tests).
  std::function<Result<std::pair<bool, std::string>>(const LoadedModel&, ThreadPool&)> sharing_gate;
  // KV-PRM verify heads (agentkv fit-prm files) for POST /v1/agents/{id}/score, each applied to the
  // served model it was fitted on (by fingerprint); a model without one scores zero-shot with the
  // log-odds of "+" against "-".
  std::vector<std::string> prm_calibrations;
};


class ApiServer {
 public:
  static Result<std::unique_ptr<ApiServer>> create(const std::vector<std::string>& models, const ServeOptions& opt);
  ~ApiServer();

  Status start();
  // Graceful: stops accepting, cancels what is still running (clients get their stream ended), joins.
  void stop();
  int port() const { return http_->port(); }

 private:
  struct Served {
    std::string id;  // the name clients put in "model"
    std::unique_ptr<LoadedModel> lm;
    std::unique_ptr<Engine> engine;
    bool sharing_allowed = true;  // the start-up quality gate's verdict
    std::string gate_summary;
    std::optional<prm::VerifyHead> verify_head;  // for step scoring; unset if the model has none
    std::string verifier_summary;
  };
  explicit ApiServer(const ServeOptions& opt);
  // Verify heads from opt_.prm_calibrations, zero-shot heads for the other models.
  Status load_verify_heads();
  void handle(const HttpRequest& req, HttpResponseWriter& w);
  void handle_completion(const HttpRequest& req, HttpResponseWriter& w, bool chat);
  // The agents and rounds API (agents_api.cpp).
  struct AgentJob;
  void handle_agents(const HttpRequest& req, HttpResponseWriter& w);
  void create_agent(const HttpRequest& req, HttpResponseWriter& w);
  void respond_agent(const std::string& id, const HttpRequest& req, HttpResponseWriter& w);
  void append_messages(const std::string& id, const HttpRequest& req, HttpResponseWriter& w);
  void fork_agent(const std::string& id, const HttpRequest& req, HttpResponseWriter& w);
  void delete_agent(const std::string& id, HttpResponseWriter& w);
  // KV-PRM scores of candidate next steps from the agent's cache (step_scoring.cpp).
  void score_agent_steps(const std::string& id, const HttpRequest& req, HttpResponseWriter& w);
  void handle_round(const HttpRequest& req, HttpResponseWriter& w);
  // Prompt and limits of one agent's turn; false after replying with the error.
  bool prepare_turn(const Agent& a, const SamplingFields& gen, HttpResponseWriter& w, AgentJob* job);
  // One turn of each agent (whose messages end with what it answers), all scheduled together as one
  // collective-round job per model (engine/collective_round.h). On success each agent (acquired,
  // updated in place) gets its answer and new KV and is released; on failure it stays as it was and
  // the error has been replied. With `sharing` (a round's recompute ratio), each model's agents
  // whose context holds the round's block as a marked segment share its KV.
  bool run_turns(std::vector<Agent>& agents, const SamplingFields& gen, HttpResponseWriter& w,
                 std::vector<AgentJob>* jobs, std::optional<double> sharing = std::nullopt,
                 RoundSharingReport* report = nullptr);
  // Runs the jobs together to their end. False if the client went away (all were cancelled).
  bool run_jobs(std::vector<AgentJob>& jobs, HttpResponseWriter& w);
  void release_kv(size_t model, uint64_t handle);
  AgentView view(const Agent& a) const;
  void sweep_agents_loop();
  std::string models_json() const;
  std::string metrics_text() const;
  int find_model(const std::string& name) const;

  ServeOptions opt_;
  std::unique_ptr<ThreadPool> pool_;
  std::vector<Served> models_;
  std::unique_ptr<EngineLoop> loop_;
  std::unique_ptr<HttpServer> http_;
  int64_t created_ = 0;
  std::unique_ptr<AgentRegistry> agents_;
  std::mutex sweep_mu_;
  std::condition_variable sweep_cv_;
  bool sweep_stop_ = false;
  std::thread sweeper_;
};

}  // namespace agentkv
