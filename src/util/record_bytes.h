// Self-describing binary records (KV tier records, segment index records): native little-endian,
// unpadded fields written one after another, opened by an 8-byte magic and a format version and
// closed by a 64-bit FNV-1a checksum (util/fnv_hash.h) over every byte before it. The writer appends
// fields; the reader bounds-checks every read and fails with a kDataLoss error naming the record and
// the field it wanted, so a parser built on it refuses bad bytes instead of reading past them.
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "util/fnv_hash.h"
#include "util/status.h"

namespace agentkv {

static_assert(std::endian::native == std::endian::little, "records are written in native byte order");

inline uint64_t record_checksum(std::span<const uint8_t> bytes) {
  Fnv1a f;
  f.mix(bytes.data(), bytes.size());
  return f.value();
}

class RecordWriter {
 public:
  RecordWriter(const char (&magic)[8], uint32_t version) {
    append(magic, sizeof magic);
    put<uint32_t>(version);
  }
  template <class T>
  void put(T v) { append(&v, sizeof v); }
  void append(const void* p, size_t n) {
    const auto* b = static_cast<const uint8_t*>(p);
    out_.insert(out_.end(), b, b + n);
  }
  // Appends the checksum of everything written and hands the record over.
  std::vector<uint8_t> finish() {
    put<uint64_t>(record_checksum(out_));
    return std::move(out_);
  }

 private:
  std::vector<uint8_t> out_;
};

class RecordReader {
 public:
  // what: the record's name in errors ("tier record").
  RecordReader(std::span<const uint8_t> b, const char* what) : b_(b), what_(what) {}

  // A kDataLoss error "<what>: <detail>".
  Error bad(const std::string& detail) const { return make_error(ErrorCode::kDataLoss, what_ + ": " + detail); }

  // Reads the magic and the format version; refuses any other.
  Status header(const char (&magic)[8], uint32_t version) {
    std::span<const uint8_t> m;
    AGENTKV_ASSIGN_OR_RETURN(m, take(sizeof magic, "the magic"));
    if (std::memcmp(m.data(), magic, sizeof magic) != 0) return bad("bad magic (not a " + what_ + ")");
    uint32_t v = 0;
    AGENTKV_ASSIGN_OR_RETURN(v, get<uint32_t>("the version"));
    if (v != version)
      return bad("format version " + std::to_string(v) + ", this build reads " + std::to_string(version));
    return Status();
  }
  Result<std::span<const uint8_t>> take(uint64_t n, const char* field) {
    if (n > b_.size() - at_)
      return make_error(ErrorCode::kDataLoss, what_ + " truncated at byte " + std::to_string(b_.size()) + ": " + field +
                                                  " needs " + std::to_string(n) + " bytes at offset " + std::to_string(at_));
    const auto s = b_.subspan(at_, size_t(n));
    at_ += size_t(n);
    return s;
  }
  template <class T>
  Result<T> get(const char* field) {
    auto s = take(sizeof(T), field);
    if (!s.ok()) return std::move(s).take_error();
    T v;
    std::memcpy(&v, s->data(), sizeof v);
    return v;
  }
  // Reads the closing checksum: the record must end right after it, and it must match every byte before it.
  Status finish() {
    const size_t summed = at_;
    uint64_t stored = 0;
    AGENTKV_ASSIGN_OR_RETURN(stored, get<uint64_t>("the checksum"));
    if (at_ != b_.size())
      return bad(std::to_string(b_.size() - at_) + " trailing bytes after the checksum at offset " + std::to_string(at_));
    if (record_checksum(b_.first(summed)) != stored) return bad("checksum mismatch (the record is corrupt)");
    return Status();
  }

 private:
  std::span<const uint8_t> b_;
  std::string what_;
  size_t at_ = 0;
};

}  // namespace agentkv
