// The engine thread: the one thread of a process that runs its engines (one per model; they share
// the CPU threads, so stepping them in turn loses nothing). Other threads (HTTP handlers, a CLI)
// submit requests and cancellations into an inbox and receive events through their callbacks,
// which run on the engine thread and must only hand data over (e.g. to a per-request mailbox).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "engine/engine.h"

namespace agentkv {

class EngineLoop {
 public:
  explicit EngineLoop(Engine& engine) : EngineLoop(std::vector<Engine*>{&engine}) {}
  explicit EngineLoop(std::vector<Engine*> engines);
  // Cancels whatever is still queued or running, then joins the thread.
  ~EngineLoop();
  EngineLoop(const EngineLoop&) = delete;
  EngineLoop& operator=(const EngineLoop&) = delete;

  // Validates on the calling thread (bad requests never reach the engine), then queues.
  // `model` indexes the engines given to the constructor.
  Result<uint64_t> submit(RequestParams p, RequestCallback cb, size_t model = 0);
  void cancel(uint64_t id, size_t model = 0);
  // Runs task on the engine thread, in order with submitted requests (e.g. to fork or release a
  // retained KV snapshot). Returns false if the loop is shutting down (the task will not run).
  bool post(std::function<void(Engine&)> task, size_t model = 0);
  // A copy of an engine's metrics, refreshed after every step.
  EngineMetrics metrics(size_t model = 0) const;
  // Engine thread only (a posted task or job): refreshes that copy now, before a job hands its
  // result over, so a client that has its answer never reads its work as still running.
  void publish_metrics(size_t model);
  size_t n_models() const { return engines_.size(); }
  // Stops accepting work; with cancel_running, cancels what is in flight, else lets it finish.
  void shutdown(bool cancel_running);
  // The first engine error, if the loop stopped on one (an engine bug; requests get "error").
  Status status() const;

 private:
  struct Pending {
    size_t model;
    uint64_t id;
    RequestParams params;
    RequestCallback cb;
    std::function<void(Engine&)> task;  // set: run this instead of adding a request
  };
  void run();
  bool any_work() const;

  std::vector<Engine*> engines_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Pending> inbox_;
  std::vector<std::pair<size_t, uint64_t>> cancels_;
  bool stopping_ = false;
  bool cancel_all_ = false;
  std::vector<EngineMetrics> metrics_;
  Status status_;
  std::thread thread_;
};

}  // namespace agentkv
