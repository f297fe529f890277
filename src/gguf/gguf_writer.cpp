#include "gguf/gguf_writer.h"

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace agentkv {

namespace {

// resize + memcpy rather than insert: g++ 12 misreports insert of a few bytes as an overflow.
void put_bytes(std::vector<uint8_t>* out, const void* p, size_t n) {
  size_t at = out->size();
  out->resize(at + n);
  std::memcpy(out->data() + at, p, n);
}

}  // namespace

void GgufWriter::put_u32(std::vector<uint8_t>* out, uint32_t v) { put_bytes(out, &v, sizeof v); }

void GgufWriter::put_u64(std::vector<uint8_t>* out, uint64_t v) { put_bytes(out, &v, sizeof v); }

void GgufWriter::put_string(std::vector<uint8_t>* out, const std::string& s) {
  put_u64(out, s.size());
  out->insert(out->end(), s.begin(), s.end());
}

void GgufWriter::add_encoded(const std::string& key, uint32_t type, const std::vector<uint8_t>& encoded) {
  put_string(&kv_bytes_, key);
  put_u32(&kv_bytes_, type);
  kv_bytes_.insert(kv_bytes_.end(), encoded.begin(), encoded.end());
  ++n_kv_;
}

void GgufWriter::add_raw(const std::string& key, GgufValueType type, const void* bytes, size_t n) {
  const auto* p = static_cast<const uint8_t*>(bytes);
  add_encoded(key, static_cast<uint32_t>(type), std::vector<uint8_t>(p, p + n));
}

void GgufWriter::add_string(const std::string& key, const std::string& value) {
  std::vector<uint8_t> enc;
  put_string(&enc, value);
  add_encoded(key, static_cast<uint32_t>(GgufValueType::STRING), enc);
}

void GgufWriter::add_numeric_array(const std::string& key, GgufValueType type, const void* data, size_t count,
                                   size_t elem_size) {
  std::vector<uint8_t> enc;
  put_u32(&enc, static_cast<uint32_t>(type));
  put_u64(&enc, count);
  const auto* p = static_cast<const uint8_t*>(data);
  enc.insert(enc.end(), p, p + count * elem_size);
  add_encoded(key, static_cast<uint32_t>(GgufValueType::ARRAY), enc);
}

void GgufWriter::add_string_array(const std::string& key, const std::vector<std::string>& values) {
  std::vector<uint8_t> enc;
  put_u32(&enc, static_cast<uint32_t>(GgufValueType::STRING));
  put_u64(&enc, values.size());
  for (const std::string& s : values) put_string(&enc, s);
  add_encoded(key, static_cast<uint32_t>(GgufValueType::ARRAY), enc);
}

void GgufWriter::set_alignment(uint32_t alignment) {
  alignment_ = alignment;
  add("general.alignment", alignment);
}

void GgufWriter::add_tensor(const std::string& name, uint32_t ggml_type, const std::vector<int64_t>& ne,
                            const std::vector<uint8_t>& data) {
  tensors_.push_back(Tensor{name, ggml_type, ne, data});
}

std::vector<uint8_t> GgufWriter::finish() const {
  // A zero alignment is written on request (for tests) but laid out as 1 here to avoid dividing by 0.
  uint64_t a = alignment_ == 0 ? 1 : alignment_;
  auto align = [a](uint64_t o) { return o + (a - o % a) % a; };
  std::vector<uint8_t> out;
  put_u32(&out, 0x46554747);
  put_u32(&out, 3);
  put_u64(&out, tensors_.size());
  put_u64(&out, n_kv_);
  out.insert(out.end(), kv_bytes_.begin(), kv_bytes_.end());
  uint64_t offset = 0;
  for (const Tensor& t : tensors_) {
    put_string(&out, t.name);
    put_u32(&out, static_cast<uint32_t>(t.ne.size()));
    for (int64_t d : t.ne) put_u64(&out, static_cast<uint64_t>(d));
    put_u32(&out, t.type);
    offset = align(offset);
    put_u64(&out, offset);
    offset += t.data.size();
  }
  if (tensors_.empty()) return out;  // no data section, so no padding to it
  uint64_t data_start = align(out.size());
  out.resize(data_start, 0);
  for (const Tensor& t : tensors_) {
    out.resize(align(out.size() - data_start) + data_start, 0);
    out.insert(out.end(), t.data.begin(), t.data.end());
  }
  return out;
}

Status GgufWriter::write_file(const std::string& path) const { return write_bytes(path, finish()); }

Status GgufWriter::write_file_checksummed(const std::string& path, const std::string& key) {
  // The header (magic, version, two counts) is 24 bytes; the value follows its key string and type.
  const size_t at = 24 + kv_bytes_.size() + 8 + key.size() + 4;
  add<uint64_t>(key, 0);
  std::vector<uint8_t> bytes = finish();
  const uint64_t sum = gguf_checksum(bytes.data(), bytes.size(), at);
  std::memcpy(bytes.data() + at, &sum, sizeof sum);
  return write_bytes(path, bytes);
}

Status GgufWriter::write_bytes(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return make_error("cannot open " + path + ": " + std::strerror(errno));
  size_t written = std::fwrite(bytes.data(), 1, bytes.size(), f);
  bool closed = std::fclose(f) == 0;
  if (written != bytes.size() || !closed) return make_error("cannot write " + path);
  return Status();
}

}  // namespace agentkv
