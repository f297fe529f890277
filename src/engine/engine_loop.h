// The engine thread: the one thread that runs an Engine. Other threads (HTTP handlers, a CLI)
// submit requests and cancellations into an inbox and receive events through their callbacks,
// which run on the engine thread and must only hand data over (e.g. to a per-request mailbox).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

#include "engine/engine.h"

namespace agentkv {

class EngineLoop {
 public:
  explicit EngineLoop(Engine& engine);
  // Cancels whatever is still queued or running, then joins the thread.
  ~EngineLoop();
  EngineLoop(const EngineLoop&) = delete;
  EngineLoop& operator=(const EngineLoop&) = delete;

  // Validates on the calling thread (bad requests never reach the engine), then queues.
  Result<uint64_t> submit(RequestParams p, RequestCallback cb);
  void cancel(uint64_t id);
  // A copy of the engine's metrics, refreshed after every step.
  EngineMetrics metrics() const;
  // Stops accepting work; with cancel_running, cancels what is in flight, else lets it finish.
  void shutdown(bool cancel_running);
  // The first engine error, if the loop stopped on one (an engine bug; requests get "error").
  Status status() const;

 private:
  struct Pending {
    uint64_t id;
    RequestParams params;
    RequestCallback cb;
  };
  void run();

  Engine& engine_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Pending> inbox_;
  std::vector<uint64_t> cancels_;
  bool stopping_ = false;
  bool cancel_all_ = false;
  EngineMetrics metrics_;
  Status status_;
  std::thread thread_;
};

}  // namespace agentkv
