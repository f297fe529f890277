// The one request mailbox: the only way an HTTP thread waits for the engine thread, for a stream of
// events (a completion) or for the one result of a job (create, fork, score, a turn, a round). The
// engine thread puts; the HTTP thread takes, checking at least every 200 ms, also while items keep
// coming (a long non-streamed generation writes nothing), whether its client went away, and then
// cancels the work once. A job's result is always received, also after a cancel, so that what it
// holds (a KV context handle) is dropped through a job instead of leaking.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "server/http_server.h"

namespace agentkv {

template <class T>
class Mailbox {
 public:
  // Any thread (the engine thread, or an HTTP thread for work that never started). `last` ends it.
  void put(T item, bool last = true) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      items_.push_back(std::move(item));
      closed_ = closed_ || last;
    }
    cv_.notify_one();
  }

  // HTTP thread: what arrived since the last call (empty when the client has just gone). The first
  // time the client is found gone, `cancel` runs (once).
  std::vector<T> take(HttpResponseWriter& w, const std::function<void()>& cancel) {
    std::vector<T> batch;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait_for(lock, kPoll, [&] { return !items_.empty(); });
      batch.swap(items_);
      finished_ = closed_ && items_.empty();
    }
    const auto now = std::chrono::steady_clock::now();
    if (!gone_ && (batch.empty() || now - last_check_ >= kPoll)) {
      last_check_ = now;
      if (w.client_gone()) {
        gone_ = true;
        if (cancel) cancel();
      }
    }
    return batch;
  }

  // HTTP thread: the job's one result, or nullopt if the client went away: then `cancel` ran, the
  // result was still waited for, and `drop` was given it (to release what it holds).
  std::optional<T> result(HttpResponseWriter& w, const std::function<void()>& cancel,
                          const std::function<void(T&)>& drop = nullptr) {
    std::optional<T> out;
    while (!finished_) {
      std::vector<T> batch = take(w, cancel);
      for (auto&& item : batch) out = std::move(item);
    }
    if (gone_ && out) {
      if (drop) drop(*out);
      out.reset();
    }
    return out;
  }

  bool finished() const { return finished_; }  // HTTP thread: the last item was taken
  bool client_gone() const { return gone_; }    // HTTP thread

 private:
  static constexpr std::chrono::milliseconds kPoll{200};
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<T> items_;
  bool closed_ = false;
  // The HTTP thread's own.
  bool finished_ = false, gone_ = false;
  std::chrono::steady_clock::time_point last_check_ = std::chrono::steady_clock::now();
};

template <class T>
using MailboxPtr = std::shared_ptr<Mailbox<T>>;

}  // namespace agentkv
