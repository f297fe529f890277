// The one request mailbox (server/mailbox.h) with a real HttpResponseWriter on a socket pair: a job's
// result arrives from another thread; a stream ends with its last item; a client that goes away gets
// the work cancelled exactly once, and a result that still arrives is handed to `drop` (so what it
// holds is released) instead of being returned.
#include "server/mailbox.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <thread>

namespace agentkv {
namespace {

struct SocketPair {
  int server = -1, client = -1;
  SocketPair() {
    int fds[2];
    EXPECT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
    server = fds[0];
    client = fds[1];
  }
  ~SocketPair() {
    if (server >= 0) close(server);
    if (client >= 0) close(client);
  }
  void close_client() {
    close(client);
    client = -1;
  }
};

TEST(Mailbox, ResultFromAnotherThreadIsReturned) {
  SocketPair sp;
  HttpResponseWriter w(sp.server, 1, true, false);
  auto box = std::make_shared<Mailbox<int>>();
  std::thread engine([box] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    box->put(42);
  });
  int cancels = 0;
  const std::optional<int> r = box->result(w, [&] { ++cancels; });
  engine.join();
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(*r, 42);
  EXPECT_EQ(cancels, 0);
  EXPECT_TRUE(box->finished());
  EXPECT_FALSE(box->client_gone());
}

TEST(Mailbox, StreamEndsWithItsLastItemInOrder) {
  SocketPair sp;
  HttpResponseWriter w(sp.server, 1, true, false);
  auto box = std::make_shared<Mailbox<int>>();
  std::thread engine([box] {
    for (int i = 0; i < 5; ++i) box->put(i, /*last=*/false);
    box->put(5, /*last=*/true);
  });
  std::vector<int> got;
  while (!box->finished())
    for (int x : box->take(w, nullptr)) got.push_back(x);
  engine.join();
  EXPECT_EQ(got, (std::vector<int>{0, 1, 2, 3, 4, 5}));
}

TEST(Mailbox, ClientGoneCancelsOnceAndTheLateResultIsDropped) {
  SocketPair sp;
  HttpResponseWriter w(sp.server, 1, true, false);
  auto box = std::make_shared<Mailbox<int>>();
  std::atomic<int> cancels{0};
  std::atomic<bool> cancelled{false};
  // The "engine" finishes only once cancelled, as a cancelled job still reports its result.
  std::thread engine([box, &cancelled] {
    while (!cancelled) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    box->put(7);
  });
  sp.close_client();
  int dropped = -1;
  const std::optional<int> r = box->result(
      w,
      [&] {
        ++cancels;
        cancelled = true;
      },
      [&](int& v) { dropped = v; });
  engine.join();
  EXPECT_FALSE(r.has_value()) << "a result for a client that left is not returned";
  EXPECT_EQ(dropped, 7) << "but it is handed to drop, to release what it holds";
  EXPECT_EQ(cancels, 1);
  EXPECT_TRUE(box->client_gone());
}

}  // namespace
}  // namespace agentkv
