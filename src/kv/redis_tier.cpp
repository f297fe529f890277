#include "kv/redis_tier.h"

#include <hiredis/hiredis.h>
#include <pthread.h>
#include <signal.h>
#include <sys/time.h>

#include <algorithm>
#include <charconv>
#include <cstring>

#include "util/hex.h"
#include "util/monotonic_clock.h"

namespace agentkv {

namespace {

using RedisReplyPtr = std::unique_ptr<redisReply, void (*)(void*)>;

// hiredis writes with write(), so a node that closed the connection raises SIGPIPE, which would end
// the process. Blocked on this thread for the command, and a SIGPIPE it raised is taken off before
// the old mask returns: the write fails with EPIPE instead, and the process's own handling is untouched.
class SigpipeBlocked {
 public:
  SigpipeBlocked() {
    sigemptyset(&pipe_);
    sigaddset(&pipe_, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_, &old_);
    sigset_t pending;
    sigpending(&pending);
    was_pending_ = sigismember(&pending, SIGPIPE) == 1;
  }
  ~SigpipeBlocked() {
    sigset_t pending;
    sigpending(&pending);
    if (!was_pending_ && sigismember(&pending, SIGPIPE) == 1) {
      const timespec zero{0, 0};
      sigtimedwait(&pipe_, nullptr, &zero);
    }
    pthread_sigmask(SIG_SETMASK, &old_, nullptr);
  }
  SigpipeBlocked(const SigpipeBlocked&) = delete;
  SigpipeBlocked& operator=(const SigpipeBlocked&) = delete;

 private:
  sigset_t pipe_, old_;
  bool was_pending_ = false;
};

timeval timeval_of_ms(int ms) { return timeval{ms / 1000, (ms % 1000) * 1000}; }

// Jump consistent hash (Lamping and Veach, "A Fast, Minimal Memory, Consistent Hash Algorithm",
// 2014) of the chained block hash over n nodes: every process with the same node list picks the
// same node for a key, and growing the list from n to n + 1 nodes moves only 1/(n + 1) of the keys.
size_t jump_consistent_hash(uint64_t key, size_t n) {
  int64_t b = -1, j = 0;
  while (j < int64_t(n)) {
    b = j;
    key = key * 2862933555777941757ULL + 1;
    j = int64_t(double(b + 1) * (double(int64_t(1) << 31) / double((key >> 33) + 1)));
  }
  return size_t(b);
}

bool is_wrongtype(const redisReply& r) {
  return r.type == REDIS_REPLY_ERROR && r.str && std::strncmp(r.str, "WRONGTYPE", 9) == 0;
}

}  // namespace

// One connection to one node, used by one thread. A failed connect or command drops the connection
// and waits out a backoff before the next connect, so a node that is down costs one refused connect
// (or one timeout) per backoff period, not one per lookup.
class RedisTier::Link {
 public:
  Link(RedisNode node, int timeout_ms, int retry_min_ms, int retry_max_ms)
      : node_(std::move(node)), timeout_ms_(timeout_ms), retry_min_ms_(retry_min_ms), retry_max_ms_(retry_max_ms) {}
  ~Link() {
    if (ctx_) redisFree(ctx_);
  }
  Link(const Link&) = delete;
  Link& operator=(const Link&) = delete;

  // The reply to the command, or null when the node cannot be reached now (down, timed out, closed
  // the connection, or still in its backoff).
  RedisReplyPtr command(std::initializer_list<std::string_view> args) {
    RedisReplyPtr none(nullptr, freeReplyObject);
    if (!ctx_ && !connect()) return none;
    std::vector<const char*> argv;
    std::vector<size_t> lens;
    for (std::string_view a : args) {
      argv.push_back(a.data());
      lens.push_back(a.size());
    }
    SigpipeBlocked no_sigpipe;
    void* r = redisCommandArgv(ctx_, int(argv.size()), argv.data(), lens.data());
    if (!r) {  // I/O error, timeout or EOF: the context cannot be used again
      fail();
      return none;
    }
    backoff_ms_ = 0;
    return RedisReplyPtr(static_cast<redisReply*>(r), freeReplyObject);
  }

 private:
  bool connect() {
    if (monotonic_seconds() < retry_at_) return false;
    const timeval tv = timeval_of_ms(timeout_ms_);
    ctx_ = redisConnectWithTimeout(node_.host.c_str(), node_.port, tv);
    if (!ctx_ || ctx_->err || redisSetTimeout(ctx_, tv) != REDIS_OK) {
      fail();
      return false;
    }
    return true;
  }
  void fail() {
    if (ctx_) redisFree(ctx_);
    ctx_ = nullptr;
    backoff_ms_ = backoff_ms_ ? std::min(2 * backoff_ms_, retry_max_ms_) : retry_min_ms_;
    retry_at_ = monotonic_seconds() + backoff_ms_ / 1000.0;
  }

  RedisNode node_;
  int timeout_ms_, retry_min_ms_, retry_max_ms_;
  redisContext* ctx_ = nullptr;
  int backoff_ms_ = 0;
  double retry_at_ = 0;
};

Result<std::vector<RedisNode>> parse_redis_nodes(std::string_view text) {
  std::vector<RedisNode> nodes;
  for (size_t at = 0; at <= text.size();) {
    const size_t comma = std::min(text.find(',', at), text.size());
    const std::string_view entry = text.substr(at, comma - at);
    at = comma + 1;
    const auto bad = [&](const char* why) {
      return make_error("Redis node '" + std::string(entry) + "': " + why + " (expected host:port)");
    };
    const size_t colon = entry.rfind(':');
    if (entry.empty() || colon == std::string_view::npos) return bad("no port");
    std::string_view host = entry.substr(0, colon), port_text = entry.substr(colon + 1);
    if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
    if (host.empty()) return bad("no host");
    int port = 0;
    const auto [end, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
    if (ec != std::errc() || end != port_text.data() + port_text.size() || port < 1 || port > 65535)
      return bad("port is not a number in [1, 65535]");
    nodes.push_back(RedisNode{std::string(host), port});
    if (comma == text.size()) break;
  }
  return nodes;
}

Result<std::unique_ptr<RedisTier>> RedisTier::open(const RedisTierOptions& opt, uint64_t fingerprint,
                                                   const TierRecordShape& shape) {
  if (opt.nodes.empty()) return make_error("KV Redis tier: no node given");
  if (opt.ttl_s < 1) return make_error("KV Redis tier: TTL " + std::to_string(opt.ttl_s) + " s is not positive");
  if (opt.timeout_ms < 1) return make_error("KV Redis tier: timeout " + std::to_string(opt.timeout_ms) + " ms is not positive");
  if (opt.max_queued < 1) return make_error("KV Redis tier: the write queue must hold at least one block");
  if (opt.retry_min_ms < 1 || opt.retry_max_ms < opt.retry_min_ms)
    return make_error("KV Redis tier: reconnect backoff must be 1 ms or more, its maximum no less than its minimum");
  std::unique_ptr<RedisTier> t(new RedisTier(opt, fingerprint, shape));
  t->start_writer(opt.max_queued, [p = t.get()](const TierWriteQueue::Block& b) { p->write_block(b); });
  t->segment_writes_ =
      std::make_unique<TierWriteQueue>(opt.max_queued, [p = t.get()](const TierWriteQueue::Block& b) { p->write_segment(b); });
  return t;
}

RedisTier::RedisTier(const RedisTierOptions& opt, uint64_t fingerprint, const TierRecordShape& shape)
    : opt_(opt),
      fingerprint_(fingerprint),
      shape_(shape),
      key_prefix_("agentkv:v" + std::to_string(kTierRecordVersion) + ":" + hex64(fingerprint) + ":"),
      segment_prefix_("agentkv:seg:v" + std::to_string(kSegmentIndexVersion) + ":" + hex64(fingerprint) + ":") {
  // The writer sends whole blocks (hundreds of kB) and waits on nobody's request: a longer timeout.
  const int write_timeout_ms = std::max(opt.timeout_ms, 1000);
  for (const RedisNode& n : opt.nodes) {
    readers_.push_back(std::make_unique<Link>(n, opt.timeout_ms, opt.retry_min_ms, opt.retry_max_ms));
    writers_.push_back(std::make_unique<Link>(n, write_timeout_ms, opt.retry_min_ms, opt.retry_max_ms));
    segment_writers_.push_back(std::make_unique<Link>(n, write_timeout_ms, opt.retry_min_ms, opt.retry_max_ms));
  }
}

RedisTier::~RedisTier() {
  segment_writes_.reset();
  stop_writer();
}

std::string RedisTier::key_of(uint64_t hash) const { return key_prefix_ + hex64(hash); }

size_t RedisTier::node_of(uint64_t hash) const { return jump_consistent_hash(hash, opt_.nodes.size()); }

bool RedisTier::get_record(uint64_t shard, const std::string& key,
                           const std::function<bool(std::span<const uint8_t>)>& accept, TierStats& stats) {
  Link& link = *readers_[node_of(shard)];
  const RedisReplyPtr r = link.command({"GET", key});
  const bool unreachable = !r || (r->type == REDIS_REPLY_ERROR && !is_wrongtype(*r));
  bool ok = false, rejected = false;
  if (!unreachable && r->type != REDIS_REPLY_NIL) {
    ok = r->type == REDIS_REPLY_STRING && accept({reinterpret_cast<const uint8_t*>(r->str), r->len});
    rejected = !ok;
  }
  // Never used, and removed so the next write of this record (here or on another server) writes a good one.
  if (rejected) link.command({"DEL", key});
  std::lock_guard<std::mutex> lock(mu_);
  if (ok) {
    ++stats.hits;
    return true;
  }
  ++stats.misses;
  if (unreachable) ++stats.fallbacks;
  if (rejected) ++stats.rejected;
  return false;
}

bool RedisTier::load(uint64_t hash, std::span<const int32_t> tokens, std::span<uint8_t> out) {
  AGENTKV_CHECK(out.size() == shape_.payload_bytes());
  if (load_queued(hash, tokens, out)) return true;
  const TierRecordKey want{fingerprint_, hash, tokens, shape_};
  return get_record(
      hash, key_of(hash),
      [&](std::span<const uint8_t> bytes) {
        Result<std::span<const uint8_t>> payload = decode_tier_record(bytes, want);
        if (payload.ok()) std::memcpy(out.data(), payload->data(), out.size());
        return payload.ok();
      },
      stats_);
}

void RedisTier::write_record(std::vector<std::unique_ptr<Link>>& links, uint64_t shard, const std::string& key,
                             std::span<const uint8_t> bytes, TierStats& stats) {
  const std::string ttl = std::to_string(opt_.ttl_s);
  // Written once: NX leaves a record already there (this block's or segment's, by its key) as it is.
  const RedisReplyPtr r = links[node_of(shard)]->command(
      {"SET", key, std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()), "NX", "EX", ttl});
  std::lock_guard<std::mutex> lock(mu_);
  if (!r || r->type == REDIS_REPLY_ERROR)
    ++stats.write_errors;
  else if (r->type == REDIS_REPLY_STATUS)
    ++stats.writes;  // "OK"; a nil reply means the key was there already
}

void RedisTier::write_block(const TierWriteQueue::Block& b) {
  const std::vector<uint8_t> bytes = encode_tier_record(TierRecordKey{fingerprint_, b.hash, b.tokens, shape_}, b.payload);
  write_record(writers_, b.hash, key_of(b.hash), bytes, stats_);
}

void RedisTier::write_segment(const TierWriteQueue::Block& b) {
  write_record(segment_writers_, b.hash, segment_key_of(b.hash), b.payload, segment_stats_);
}

std::string RedisTier::segment_key_of(uint64_t key) const { return segment_prefix_ + hex64(key); }

void RedisTier::store_segment(std::span<const int32_t> tokens, int64_t begin) {
  const std::vector<uint8_t> record = encode_segment_index(fingerprint_, tokens, begin);
  if (segment_writes_->push(segment_key(tokens.subspan(size_t(begin))), {}, record)) return;
  std::lock_guard<std::mutex> lock(mu_);
  ++segment_stats_.write_drops;
}

std::optional<SegmentIndex> RedisTier::load_segment(std::span<const int32_t> segment) {
  const uint64_t k = segment_key(segment);
  std::optional<SegmentIndex> found;
  get_record(
      k, segment_key_of(k),
      [&](std::span<const uint8_t> bytes) {
        Result<SegmentIndex> rec = decode_segment_index(bytes, fingerprint_, segment);
        if (rec.ok()) found = std::move(*rec);
        return rec.ok();
      },
      segment_stats_);
  return found;
}

TierStats RedisTier::segment_stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return segment_stats_;
}

bool RedisTier::flush_segments_for(std::chrono::milliseconds timeout) { return segment_writes_->flush_for(timeout); }

}  // namespace agentkv
