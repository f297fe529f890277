// agentkv serve: the OpenAI-compatible and agents API over the engines of one or more models.
// ApiServer holds the state (server/server_state.h) and routes each request to its route file
// (server/routes.h); HTTP threads only parse, validate, post to the one engine thread (EngineLoop)
// and wait on a mailbox (server/mailbox.h).
#pragma once

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "server/server_state.h"

namespace agentkv {

// The token of the request's "Authorization: Bearer TOKEN" (the scheme case-insensitive, RFC 7235 2.1);
// nullopt when there is none or another scheme; an error for two Authorization headers (which one
// counts would be ambiguous).
Result<std::optional<std::string>> bearer_token(const HttpRequest& req);

class ApiServer {
 public:
  // transport: the connection caps, timeouts and drain time; its host, port and body limit are opt's.
  static Result<std::unique_ptr<ApiServer>> create(const std::vector<std::string>& models, const ServeOptions& opt,
                                                   HttpServerOptions transport = {});
  ~ApiServer();

  Status start();
  // Graceful: drains (running requests may finish up to the transport's drain_timeout_s while new ones
  // get 503), cancels what is still running (clients get their stream ended), joins.
  void stop();
  int port() const { return http_->port(); }

 private:
  ApiServer() = default;
  // Verify heads from opt.prm_calibrations and opt.prm_adapters, zero-shot heads for the other models.
  Status load_verify_heads();
  // Transfer maps from opt.transfer_maps: each between two served models, one per ordered pair.
  Status load_transfer_maps();
  // The router: authentication, then the route file of the path.
  void handle(const HttpRequest& req, HttpResponseWriter& w);
  // The route file of the path (after authentication and the admission of large bodies).
  void route(const HttpRequest& req, HttpResponseWriter& w);
  // Releases (through an engine job) the contexts of agents whose TTL ran out.
  void sweep_agents_loop();

  // The admission of large bodies (api_server.cpp): how many are being handled now, and the most
  // elements a body's array may hold.
  size_t max_array_elements_ = 0;
  ServerState s_;
  std::unique_ptr<HttpServer> http_;
  std::mutex sweep_mu_;
  std::condition_variable sweep_cv_;
  bool sweep_stop_ = false;
  std::thread sweeper_;
};

}  // namespace agentkv
