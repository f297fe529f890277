#include "engine/engine_loop.h"

#include "util/status.h"

namespace agentkv {

EngineLoop::EngineLoop(std::vector<Engine*> engines) : engines_(std::move(engines)) {
  AGENTKV_CHECK(!engines_.empty());
  for (Engine* e : engines_) metrics_.push_back(e->metrics());
  thread_ = std::thread([this] { run(); });
}

EngineLoop::~EngineLoop() { shutdown(true); }

Result<uint64_t> EngineLoop::submit(RequestParams p, RequestCallback cb, size_t model) {
  if (model >= engines_.size()) return make_error(ErrorCode::kNotFound, "unknown model index " + std::to_string(model));
  AGENTKV_TRY(engines_[model]->validate(p));
  const uint64_t id = engines_[model]->next_request_id();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return make_error(ErrorCode::kUnavailable, "the engine is shutting down");
    // A client that has its final event and then reads the metrics must see its request gone:
    // the engine has released its blocks by the time it calls back, so the copy is refreshed
    // right before the final event is handed over instead of after the whole step.
    RequestCallback publishing = [this, model, cb = std::move(cb)](const RequestEvent& ev) {
      if (ev.request_finished) {
        const EngineMetrics fresh = engines_[model]->metrics();
        std::lock_guard<std::mutex> lock(mu_);
        metrics_[model] = fresh;
      }
      if (cb) cb(ev);
    };
    inbox_.push_back(Pending{model, id, std::move(p), std::move(publishing), nullptr});
  }
  cv_.notify_one();
  return id;
}

bool EngineLoop::post(std::function<void(Engine&)> task, size_t model) {
  if (model >= engines_.size()) return false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return false;
    inbox_.push_back(Pending{model, 0, RequestParams{}, nullptr, std::move(task)});
  }
  cv_.notify_one();
  return true;
}

void EngineLoop::cancel(uint64_t id, size_t model) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    cancels_.emplace_back(model, id);
  }
  cv_.notify_one();
}

EngineMetrics EngineLoop::metrics(size_t model) const {
  std::lock_guard<std::mutex> lock(mu_);
  return metrics_.at(model);
}

void EngineLoop::publish_metrics(size_t model) {
  const EngineMetrics fresh = engines_.at(model)->metrics();
  std::lock_guard<std::mutex> lock(mu_);
  metrics_[model] = fresh;
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

bool EngineLoop::any_work() const {
  for (Engine* e : engines_)
    if (e->has_work()) return true;
  return false;
}

void EngineLoop::run() {
  std::vector<Pending> inbox;
  std::vector<std::pair<size_t, uint64_t>> cancels;
  std::vector<std::vector<uint64_t>> live(engines_.size());  // added and maybe not finished
  for (;;) {
    bool stop = false, cancel_all = false;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stopping_ || !inbox_.empty() || !cancels_.empty() || any_work(); });
      inbox.swap(inbox_);
      cancels.swap(cancels_);
      stop = stopping_;
      cancel_all = cancel_all_;
    }
    for (Pending& p : inbox) {
      if (p.task) {
        // A job (an agent's release, a round's commit, a fork) changes the KV at once: publish then,
        // not only after the next step, which a long prefill can make seconds away.
        p.task(*engines_[p.model]);
        publish_metrics(p.model);
        continue;
      }
      RequestCallback cb = p.cb;
      Status st = engines_[p.model]->add_request_with_id(p.id, std::move(p.params), std::move(p.cb));
      if (!st.ok()) {
        if (cb) {
          RequestEvent ev;
          ev.request_id = p.id;
          ev.seq_finished = ev.request_finished = true;
          ev.finish_reason = FinishReason::kError;
          ev.error = st.error();
          ev.error_code = st.code();
          cb(ev);
        }
      } else {
        live[p.model].push_back(p.id);
      }
    }
    inbox.clear();
    for (auto& [model, id] : cancels)
      if (model < engines_.size()) engines_[model]->cancel(id);
    cancels.clear();
    for (size_t m = 0; m < engines_.size(); ++m) {
      Engine& e = *engines_[m];
      if (stop && cancel_all)
        for (uint64_t id : live[m]) e.cancel(id);  // unknown (finished) ids are ignored
      if (e.has_work()) {
        Status st = e.step();
        if (!st.ok()) {
          {
            std::lock_guard<std::mutex> lock(mu_);
            if (status_.ok()) status_ = st;
          }
          for (uint64_t id : live[m]) e.cancel(id);
        }
      }
      if (!e.has_work()) live[m].clear();  // everything added so far has finished
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (size_t m = 0; m < engines_.size(); ++m) metrics_[m] = engines_[m]->metrics();
    }
    if (stop && !any_work()) {
      std::lock_guard<std::mutex> lock(mu_);
      if (inbox_.empty()) return;
    }
  }
}

}  // namespace agentkv
