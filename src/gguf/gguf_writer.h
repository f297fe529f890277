// Builds GGUF v3 files in memory: tests and tools make synthetic models with it. It writes what it
// is asked to without validating (tests need malformed files too); GgufFile::parse is the checker.
#pragma once

#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "gguf/gguf_file.h"
#include "util/status.h"

namespace agentkv {

template <class T>
constexpr GgufValueType gguf_type_of() {
  if constexpr (std::is_same_v<T, bool>)
    return GgufValueType::BOOL;
  else if constexpr (std::is_same_v<T, uint8_t>)
    return GgufValueType::U8;
  else if constexpr (std::is_same_v<T, int8_t>)
    return GgufValueType::I8;
  else if constexpr (std::is_same_v<T, uint16_t>)
    return GgufValueType::U16;
  else if constexpr (std::is_same_v<T, int16_t>)
    return GgufValueType::I16;
  else if constexpr (std::is_same_v<T, uint32_t>)
    return GgufValueType::U32;
  else if constexpr (std::is_same_v<T, int32_t>)
    return GgufValueType::I32;
  else if constexpr (std::is_same_v<T, uint64_t>)
    return GgufValueType::U64;
  else if constexpr (std::is_same_v<T, int64_t>)
    return GgufValueType::I64;
  else if constexpr (std::is_same_v<T, float>)
    return GgufValueType::F32;
  else {
    static_assert(std::is_same_v<T, double>, "not a GGUF scalar type");
    return GgufValueType::F64;
  }
}

class GgufWriter {
 public:
  // Scalar of any GGUF numeric type (bool, u8..i64, float, double).
  template <class T>
  void add(const std::string& key, T value) {
    add_raw(key, gguf_type_of<T>(), &value, sizeof value);
  }
  void add_string(const std::string& key, const std::string& value);
  template <class T>
  void add_array(const std::string& key, const std::vector<T>& values) {
    if constexpr (std::is_same_v<T, bool>) {
      // vector<bool> is packed and has no data(); GGUF stores one byte per bool.
      std::vector<uint8_t> bytes(values.begin(), values.end());
      add_numeric_array(key, GgufValueType::BOOL, bytes.data(), bytes.size(), 1);
    } else {
      add_numeric_array(key, gguf_type_of<T>(), values.data(), values.size(), sizeof(T));
    }
  }
  void add_string_array(const std::string& key, const std::vector<std::string>& values);
  // Any value given as its type id and encoded bytes (for nested arrays and corrupt values).
  void add_encoded(const std::string& key, uint32_t type, const std::vector<uint8_t>& encoded);

  // Also adds general.alignment (U32) so the file says what the writer used.
  void set_alignment(uint32_t alignment);

  // Data are placed in the order added, each at the next aligned offset; `data` should hold
  // exactly the tensor's byte size but is written as given.
  void add_tensor(const std::string& name, uint32_t ggml_type, const std::vector<int64_t>& ne,
                  const std::vector<uint8_t>& data);

  std::vector<uint8_t> finish() const;
  Status write_file(const std::string& path) const;
  // Adds `key` (U64) as the last metadata value, holding gguf_checksum of the finished file with
  // that value read as zero, and writes the file (GgufFile::verify_checksum checks it).
  Status write_file_checksummed(const std::string& path, const std::string& key);

  // Encoding helpers, exposed so tests can build values for add_encoded.
  static void put_u32(std::vector<uint8_t>* out, uint32_t v);
  static void put_u64(std::vector<uint8_t>* out, uint64_t v);
  static void put_string(std::vector<uint8_t>* out, const std::string& s);

 private:
  void add_raw(const std::string& key, GgufValueType type, const void* bytes, size_t n);
  void add_numeric_array(const std::string& key, GgufValueType type, const void* data, size_t count,
                         size_t elem_size);

  struct Tensor {
    std::string name;
    uint32_t type;
    std::vector<int64_t> ne;
    std::vector<uint8_t> data;
  };
  static Status write_bytes(const std::string& path, const std::vector<uint8_t>& bytes);

  std::vector<uint8_t> kv_bytes_;
  uint64_t n_kv_ = 0;
  std::vector<Tensor> tensors_;
  uint32_t alignment_ = 32;
};

}  // namespace agentkv
