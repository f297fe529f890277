// What every route of agentkv serve reads: the options, the served models (engine, quality gate's
// verdict, verify head), the transfer maps between them, the engine loop, the agent registry; and
// the small helpers the route files share (error replies, JSON bodies). The routes live in
// server/*_routes.cpp; ApiServer owns this state and dispatches to them.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "engine/engine.h"
#include "engine/engine_loop.h"
#include "prm/verify_head.h"
#include "server/agent_registry.h"
#include "server/agents_protocol.h"
#include "server/http_server.h"
#include "server/openai_protocol.h"
#include "transfer/transfer_map.h"

namespace agentkv {

struct ServeOptions {
  std::string host = "127.0.0.1";
  int port = 8080;
  std::string api_key;          // empty: no authentication
  int64_t kv_mem = 0;           // per model; 0: the default share of RAM split between the models
  int block_size = 16;
  // The KV disk tier (kv/disk_tier.h): dir (empty: off) and each model's size budget there (0: none).
  DiskTierOptions kv_disk;
  // The KV Redis tier (kv/redis_tier.h) below the disk: nodes (empty: off), TTL and lookup timeout.
  RedisTierOptions kv_redis;
  int threads = 0;
  // Tokens per engine step: decode tokens first, then prefill chunks in what is left, so a long
  // prompt is prefilled a chunk per step while other sequences keep decoding.
  int max_batch_tokens = 512;
  size_t max_body_bytes = size_t(8) << 20;
  ApiLimits limits;
  AgentLimits agent_limits;
  // Collective KV sharing of a round's shared block (TokenDance, issue 5): whether rounds use it
  // (each request can still turn it off), and the share of the block recomputed per agent.
  bool round_sharing = true;
  double recompute = 0.15;
  // Collective sharing of chat completions' messages (engine/chat_sharing.h): the default of a
  // request's "kv_sharing", on only where the model passes chat_sharing_gate.
  bool chat_sharing = true;
  // Blended chat contexts stored as master + diff (EngineOptions::chat_compact).
  bool chat_compact = true;
  // How master + diff storage keeps its diff rows (EngineOptions::diff_format).
  DiffFormat diff_format = DiffFormat::kF16;
  // Agents resume their master + diff contexts inside attention (EngineOptions::resume_in_attention).
  bool resume_in_attention = false;
  // Echoes of an agent's own answer in a later round's block (EngineOptions::echo_keep); unset: off.
  std::optional<double> echo_keep;
  // Where a round computes its block's master (EngineOptions::master_context).
  MasterContext master_context = MasterContext::kBlock;
  // The share of a chat request's reused message tokens recomputed when the request does not say.
  double chat_recompute = 0.05;
  // Run once per model at start-up when round_sharing is on: the quality gate. It returns whether
  // approximate sharing is allowed on that model (and a line saying what was measured); a model that
  // fails runs every round exactly. Unset: allowed without a check (library use, tests).
  std::function<Result<std::pair<bool, std::string>>(const LoadedModel&, ThreadPool&)> sharing_gate;
  // The same for chat sharing's path (run when chat_sharing is on).
  std::function<Result<std::pair<bool, std::string>>(const LoadedModel&, ThreadPool&)> chat_sharing_gate;
  // KV-PRM verify heads (agentkv fit-prm files) for POST /v1/agents/{id}/score, each applied to the
  // served model it was fitted on (by fingerprint); a model without one scores zero-shot with the
  // log-odds of "+" against "-".
  std::vector<std::string> prm_calibrations;
  // KV-PRM verifiers with trained LoRA adapters (agentkv fit-prm --lora files), each on the served
  // model it was fitted on; a model takes a calibration or adapters, not both.
  std::vector<std::string> prm_adapters;
  // Fitted KV-transfer maps (agentkv fit-transfer files) for POST /v1/agents/{id}/transfer, each
  // between two served models (by fingerprint); start-up refuses a damaged file or another pair.
  std::vector<std::string> transfer_maps;
};

struct ServedModel {
  std::string id;  // the name clients put in "model"
  std::unique_ptr<LoadedModel> lm;
  // The engine loop's: HTTP threads read only n_ctx() and validate(), and wait on the KV tiers' writes
  // (kv().flush_shared_tiers(), thread-safe).
  std::unique_ptr<Engine> engine;
  bool sharing_allowed = true;     // the start-up quality gate's verdict
  std::string gate_summary;
  bool chat_sharing_allowed = true;  // the chat path's gate verdict
  std::string chat_gate_summary;
  std::optional<prm::VerifyHead> verify_head;  // for step scoring; unset if the model has none
  std::string verifier_summary;
};

// A transfer map the server loaded, between two of its models (indexes into ServerState::models).
struct ServedTransferMap {
  size_t sender = 0, receiver = 0;
  TransferMap map;
  std::string path;
};

struct ServerState {
  ServeOptions opt;
  std::unique_ptr<ThreadPool> pool;
  std::vector<ServedModel> models;
  std::unique_ptr<EngineLoop> loop;
  std::unique_ptr<AgentRegistry> agents;
  std::vector<ServedTransferMap> transfer_maps;  // read-only once serving
  int64_t created = 0;  // unix seconds: the models' "created"

  // The index of a served model by id, name or path; -1: none.
  int find_model(const std::string& name) const;
  // The map from one served model to another; nullptr: none was loaded.
  const ServedTransferMap* find_transfer_map(size_t sender, size_t receiver) const;
  AgentView view(const Agent& a) const;
};

// The error object with its status.
void reply(HttpResponseWriter& w, const ApiError& e);
// The body as JSON, or nullopt after a 400; an empty body is {} when empty_ok.
std::optional<Json> parse_body(const HttpRequest& req, HttpResponseWriter& w, bool empty_ok);
// A 404 naming the model, for a request whose "model" is not served.
ApiError unknown_model(const std::string& name);
int64_t unix_now();

}  // namespace agentkv
