#include "engine/engine_loop.h"

namespace agentkv {

EngineLoop::EngineLoop(Engine& engine) : engine_(engine), metrics_(engine.metrics()) {
  thread_ = std::thread([this] { run(); });
}

EngineLoop::~EngineLoop() { shutdown(true); }

Result<uint64_t> EngineLoop::submit(RequestParams p, RequestCallback cb) {
  AGENTKV_TRY(engine_.validate(p));
  const uint64_t id = engine_.next_request_id();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return make_error("the engine is shutting down");
    inbox_.push_back(Pending{id, std::move(p), std::move(cb)});
  }
  cv_.notify_one();
  return id;
}

void EngineLoop::cancel(uint64_t id) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    cancels_.push_back(id);
  }
  cv_.notify_one();
}

EngineMetrics EngineLoop::metrics() const {
  std::lock_guard<std::mutex> lock(mu_);
  return metrics_;
}

Status EngineLoop::status() const {
  std::lock_guard<std::mutex> lock(mu_);
  return status_;
}

void EngineLoop::shutdown(bool cancel_running) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    cancel_all_ = cancel_all_ || cancel_running;
  }
  cv_.notify_one();
  if (thread_.joinable()) thread_.join();
}

void EngineLoop::run() {
  std::vector<Pending> inbox;
  std::vector<uint64_t> cancels;
  std::vector<uint64_t> live;  // ids added to the engine and not known to be finished
  for (;;) {
    bool stop = false, cancel_all = false;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stopping_ || !inbox_.empty() || !cancels_.empty() || engine_.has_work(); });
      inbox.swap(inbox_);
      cancels.swap(cancels_);
      stop = stopping_;
      cancel_all = cancel_all_;
    }
    for (Pending& p : inbox) {
      RequestCallback cb = p.cb;
      Status st = engine_.add_request_with_id(p.id, std::move(p.params), std::move(p.cb));
      if (!st.ok() && cb) {
        RequestEvent ev;
        ev.request_id = p.id;
        ev.seq_finished = ev.request_finished = true;
        ev.finish_reason = "error";
        ev.error = st.error();
        cb(ev);
      } else {
        live.push_back(p.id);
      }
    }
    inbox.clear();
    for (uint64_t id : cancels) engine_.cancel(id);
    cancels.clear();
    if (stop && cancel_all)
      for (uint64_t id : live) engine_.cancel(id);  // unknown (finished) ids are ignored
    if (engine_.has_work()) {
      Status st = engine_.step();
      if (!st.ok()) {
        std::lock_guard<std::mutex> lock(mu_);
        if (status_.ok()) status_ = st;
      }
      if (!st.ok())
        for (uint64_t id : live) engine_.cancel(id);
    }
    if (!engine_.has_work()) live.clear();  // everything added so far has finished
    {
      std::lock_guard<std::mutex> lock(mu_);
      metrics_ = engine_.metrics();
    }
    if (stop && !engine_.has_work()) {
      std::lock_guard<std::mutex> lock(mu_);
      if (inbox_.empty()) return;
    }
  }
}

}  // namespace agentkv
