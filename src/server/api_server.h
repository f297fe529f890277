// agentkv serve: the OpenAI-compatible API over the engines of one or more models. HTTP threads only
// parse, validate, enqueue and wait on a per-request mailbox; the one engine thread (EngineLoop)
// runs every model's engine.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "engine/engine_loop.h"
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
  };
  explicit ApiServer(const ServeOptions& opt);
  void handle(const HttpRequest& req, HttpResponseWriter& w);
  void handle_completion(const HttpRequest& req, HttpResponseWriter& w, bool chat);
  std::string models_json() const;
  std::string metrics_text() const;
  int find_model(const std::string& name) const;

  ServeOptions opt_;
  std::unique_ptr<ThreadPool> pool_;
  std::vector<Served> models_;
  std::unique_ptr<EngineLoop> loop_;
  std::unique_ptr<HttpServer> http_;
  int64_t created_ = 0;
};

}  // namespace agentkv
