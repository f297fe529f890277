#include "kv/disk_tier.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "util/hex.h"

namespace agentkv {

namespace {

constexpr const char* kSuffix = ".kvblock";

bool write_all(int fd, const uint8_t* p, size_t n) {
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    p += w;
    n -= size_t(w);
  }
  return true;
}

// Reads up to `limit` bytes: a file longer than any valid record is not read whole.
bool read_up_to(const std::string& path, size_t limit, std::vector<uint8_t>* out, bool* absent) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    *absent = errno == ENOENT;
    return false;
  }
  out->resize(limit);
  size_t got = 0;
  while (got < limit) {
    const ssize_t r = ::read(fd, out->data() + got, limit - got);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    got += size_t(r);
  }
  ::close(fd);
  out->resize(got);
  return true;
}

}  // namespace

Result<std::unique_ptr<DiskTier>> DiskTier::open(const DiskTierOptions& opt, uint64_t fingerprint,
                                                 const TierRecordShape& shape) {
  if (opt.dir.empty()) return make_error("KV disk tier: no directory given");
  if (opt.max_bytes < 0) return make_error("KV disk tier: size budget " + std::to_string(opt.max_bytes) + " is negative");
  if (opt.max_queued < 1) return make_error("KV disk tier: the write queue must hold at least one block");
  std::error_code ec;
  std::filesystem::create_directories(opt.dir, ec);
  if (ec) return make_error("KV disk tier: cannot create directory '" + opt.dir + "': " + ec.message());
  if (::access(opt.dir.c_str(), W_OK | X_OK) != 0)
    return make_error("KV disk tier: directory '" + opt.dir + "' is not writable: " + std::strerror(errno));
  std::unique_ptr<DiskTier> t(new DiskTier(opt, fingerprint, shape));
  t->scan_existing();
  t->start_writer(opt.max_queued, [p = t.get()](const TierWriteQueue::Block& b) { p->write_record(b); });
  return t;
}

DiskTier::DiskTier(const DiskTierOptions& opt, uint64_t fingerprint, const TierRecordShape& shape)
    : opt_(opt),
      fingerprint_(fingerprint),
      shape_(shape),
      name_prefix_(hex64(fingerprint) + "-"),
      // Every record of this tier has the same size (full blocks of one shape): measured once here.
      read_limit_(encode_tier_record(TierRecordKey{fingerprint, 0, std::vector<int32_t>(shape.block_size), shape}, {})
                      .size() + shape.payload_bytes() + 1) {}

DiskTier::~DiskTier() { stop_writer(); }

std::string DiskTier::path_of(uint64_t hash) const { return opt_.dir + "/" + name_prefix_ + hex64(hash) + kSuffix; }

void DiskTier::scan_existing() {
  // Records of this model already in the directory count toward the budget, oldest first.
  struct Found {
    std::filesystem::file_time_type mtime;
    uint64_t hash;
    int64_t size;
  };
  std::vector<Found> found;
  std::error_code ec;
  for (auto it = std::filesystem::directory_iterator(opt_.dir, ec); !ec && it != std::filesystem::directory_iterator();
       it.increment(ec)) {
    const std::string name = it->path().filename().string();
    const size_t hash_at = name_prefix_.size();
    if (name.size() != hash_at + 16 + std::strlen(kSuffix) || name.compare(0, hash_at, name_prefix_) != 0 ||
        name.compare(hash_at + 16, std::string::npos, kSuffix) != 0)
      continue;
    std::error_code e1, e2;
    const auto size = it->file_size(e1);
    const auto mtime = it->last_write_time(e2);
    if (e1 || e2) continue;
    found.push_back({mtime, std::strtoull(name.substr(hash_at, 16).c_str(), nullptr, 16), int64_t(size)});
  }
  std::sort(found.begin(), found.end(), [](const Found& a, const Found& b) { return a.mtime < b.mtime; });
  std::lock_guard<std::mutex> lock(mu_);
  for (const Found& f : found) remember(f.hash, f.size);
  enforce_budget();  // a smaller budget than the last run's applies at once
}

bool DiskTier::load(uint64_t hash, std::span<const int32_t> tokens, std::span<uint8_t> out) {
  AGENTKV_CHECK(out.size() == shape_.payload_bytes());
  if (load_queued(hash, tokens, out)) return true;
  const std::string path = path_of(hash);
  const TierRecordKey key{fingerprint_, hash, tokens, shape_};
  std::vector<uint8_t> bytes;
  bool absent = false;
  const bool read = read_up_to(path, read_limit_, &bytes, &absent);
  Result<std::span<const uint8_t>> payload = read ? decode_tier_record(bytes, key)
                                                  : Result<std::span<const uint8_t>>(make_error("unreadable"));
  if (payload.ok()) std::memcpy(out.data(), payload->data(), out.size());
  std::lock_guard<std::mutex> lock(mu_);
  if (payload.ok()) {
    ++stats_.hits;
    return true;
  }
  ++stats_.misses;
  if (absent) return false;
  if (!read) {  // there but unreadable (permissions, I/O): not the record's fault, so it stays
    ++stats_.fallbacks;
    return false;
  }
  // Present but unusable (corrupt, truncated, another model's or build's): never used, and removed so
  // the next eviction of this block writes a good one.
  ++stats_.rejected;
  ::unlink(path.c_str());
  forget(hash);
  return false;
}

void DiskTier::write_record(const TierWriteQueue::Block& p) {
  const std::string path = path_of(p.hash);
  // Written once: a record already there (this block's, by its name) is left as it is.
  if (::access(path.c_str(), F_OK) == 0) return;
  const std::vector<uint8_t> bytes = encode_tier_record(TierRecordKey{fingerprint_, p.hash, p.tokens, shape_}, p.payload);
  // Hidden until whole: a crash or a full disk leaves at most a dot-file no lookup reads.
  const std::string tmp = opt_.dir + "/.tmp-" + name_prefix_ + hex64(p.hash) + "-" + std::to_string(::getpid()) +
                          "-" + std::to_string(temp_seq_.fetch_add(1));
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  bool ok = fd >= 0 && write_all(fd, bytes.data(), bytes.size());
  if (fd >= 0) ok = ::close(fd) == 0 && ok;
  // link() fails when the name exists, so a record is never replaced (rename() would replace it).
  const bool linked = ok && ::link(tmp.c_str(), path.c_str()) == 0;
  const bool existed = ok && !linked && errno == EEXIST;
  if (fd >= 0) ::unlink(tmp.c_str());
  std::lock_guard<std::mutex> lock(mu_);
  if (!linked) {
    if (!existed) ++stats_.write_errors;
    return;
  }
  ++stats_.writes;
  remember(p.hash, int64_t(bytes.size()));
  enforce_budget();
}

void DiskTier::remember(uint64_t hash, int64_t size) {
  const uint64_t seq = next_seq_++;
  if (!written_.emplace(hash, Written{size, seq}).second) return;
  stats_.bytes += size;
  if (opt_.max_bytes > 0) order_.emplace_back(hash, seq);
}

void DiskTier::forget(uint64_t hash) {
  auto it = written_.find(hash);
  if (it == written_.end()) return;
  stats_.bytes -= it->second.size;
  written_.erase(it);
}

void DiskTier::enforce_budget() {
  while (opt_.max_bytes > 0 && stats_.bytes > opt_.max_bytes && !order_.empty()) {
    const auto [hash, seq] = order_.front();
    order_.pop_front();
    auto it = written_.find(hash);
    if (it == written_.end() || it->second.seq != seq) continue;
    ::unlink(path_of(hash).c_str());
    forget(hash);
    ++stats_.removed;
  }
}

}  // namespace agentkv
