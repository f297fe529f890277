// The routes of agentkv serve, one file each (ApiServer::handle dispatches): every handler parses and
// validates its body, posts its engine work as one job and waits on a mailbox (server/mailbox.h).
//   openai_routes.cpp   POST /v1/completions, /v1/chat/completions; GET /v1/models
//   agents_routes.cpp   /v1/agents[/{id}[/messages|respond|fork|export|transfer]], /v1/agents/import
//   rounds_routes.cpp   POST /v1/rounds
//   score_routes.cpp    POST /v1/agents/{id}/score
//   metrics_routes.cpp  GET /metrics, /health
//   openapi_routes.cpp  GET /openapi.json (docs/openapi.json, embedded)
#pragma once

#include <string>

#include "server/server_state.h"

namespace agentkv {

void handle_completion(ServerState& s, const HttpRequest& req, HttpResponseWriter& w, bool chat);
void handle_models(const ServerState& s, const HttpRequest& req, HttpResponseWriter& w);
// Every /v1/agents path but score.
void handle_agents(ServerState& s, const HttpRequest& req, HttpResponseWriter& w);
void handle_round(ServerState& s, const HttpRequest& req, HttpResponseWriter& w);
void handle_score(ServerState& s, const std::string& agent_id, const HttpRequest& req, HttpResponseWriter& w);
void handle_metrics(const ServerState& s, const HttpRequest& req, HttpResponseWriter& w);
void handle_health(const HttpRequest& req, HttpResponseWriter& w);
void handle_openapi(const HttpRequest& req, HttpResponseWriter& w);

}  // namespace agentkv
