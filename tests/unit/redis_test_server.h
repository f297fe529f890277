// A redis-server the test starts itself: a child process on a free loopback port, with no persistence
// (--save '' --appendonly no), killed when the test ends. Tests call start() from SetUp and skip, with
// a message saying so, only when no redis-server binary is installed (scripts/setup.sh installs it).
#pragma once

#include <arpa/inet.h>
#include <hiredis/hiredis.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fcntl.h>
#include <initializer_list>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace agentkv::testing_redis {

// The redis-server on PATH, or "" when there is none.
inline std::string redis_server_binary() {
  const char* path = std::getenv("PATH");
  std::string dirs = path ? path : "/usr/local/bin:/usr/bin:/bin";
  for (size_t at = 0; at <= dirs.size();) {
    const size_t colon = std::min(dirs.find(':', at), dirs.size());
    const std::string candidate = dirs.substr(at, colon - at) + "/redis-server";
    if (colon > at && ::access(candidate.c_str(), X_OK) == 0) return candidate;
    at = colon + 1;
  }
  return "";
}

// A loopback port nothing listens on now (the kernel's pick for port 0).
inline int free_loopback_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  int port = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0)
    port = ntohs(a.sin_port);
  ::close(fd);
  return port;
}

using ReplyPtr = std::unique_ptr<redisReply, void (*)(void*)>;

class RedisTestServer {
 public:
  RedisTestServer() = default;
  ~RedisTestServer() { kill(); }
  RedisTestServer(const RedisTestServer&) = delete;
  RedisTestServer& operator=(const RedisTestServer&) = delete;

  // Starts redis-server on `port` (0: a free one) and waits until it answers PING; "" or why not.
  std::string start(int port = 0) {
    const std::string bin = redis_server_binary();
    if (bin.empty()) return "no redis-server binary on PATH";
    port_ = port ? port : free_loopback_port();
    const std::string port_text = std::to_string(port_);
    const pid_t parent = ::getpid();
    pid_ = ::fork();
    if (pid_ == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlives a test binary that crashed
      if (::getppid() != parent) ::_exit(1);
      const int null = ::open("/dev/null", O_RDWR);
      ::dup2(null, 1);
      ::dup2(null, 2);
      ::execl(bin.c_str(), "redis-server", "--port", port_text.c_str(), "--bind", "127.0.0.1", "--save", "",
              "--appendonly", "no", "--dir", "/tmp", static_cast<char*>(nullptr));
      ::_exit(127);
    }
    if (pid_ < 0) return "fork failed";
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (std::chrono::steady_clock::now() < deadline) {
      ReplyPtr r = command({"PING"});
      if (r && r->type == REDIS_REPLY_STATUS) return "";
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return "redis-server exited at start-up (port " + port_text + " taken?)";
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    kill();
    return "redis-server did not answer PING on port " + port_text + " within 10 s";
  }
  // Ends it at once (SIGKILL), as a crash would.
  void kill() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGCONT);
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }
  // A hung node: stopped (it accepts connections but answers nothing) or running again.
  void pause(bool paused) {
    if (pid_ > 0) ::kill(pid_, paused ? SIGSTOP : SIGCONT);
  }
  int port() const { return port_; }
  // One command on a fresh connection; null when the server does not answer.
  ReplyPtr command(std::initializer_list<std::string_view> args) const {
    ReplyPtr none(nullptr, freeReplyObject);
    redisContext* c = redisConnectWithTimeout("127.0.0.1", port_, timeval{1, 0});
    if (!c || c->err) {
      if (c) redisFree(c);
      return none;
    }
    redisSetTimeout(c, timeval{1, 0});
    std::vector<const char*> argv;
    std::vector<size_t> lens;
    for (std::string_view a : args) {
      argv.push_back(a.data());
      lens.push_back(a.size());
    }
    void* r = redisCommandArgv(c, int(argv.size()), argv.data(), lens.data());
    redisFree(c);
    return r ? ReplyPtr(static_cast<redisReply*>(r), freeReplyObject) : std::move(none);
  }
  bool has_key(const std::string& key) const {
    ReplyPtr r = command({"EXISTS", key});
    return r && r->type == REDIS_REPLY_INTEGER && r->integer == 1;
  }

 private:
  pid_t pid_ = -1;
  int port_ = 0;
};

}  // namespace agentkv::testing_redis
