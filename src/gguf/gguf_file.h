// GGUF v3 reader (format: ../shared/reference/models.md §2). open() maps the file and validates every
// count, length, offset and size against it before use, so a malformed file yields one error line
// naming the field, never a crash, hang or huge allocation. Tensor data stays in the map.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "util/mapped_file.h"
#include "util/status.h"

namespace agentkv {

enum class GgufValueType : uint32_t {
  U8 = 0,
  I8 = 1,
  U16 = 2,
  I16 = 3,
  U32 = 4,
  I32 = 5,
  F32 = 6,
  BOOL = 7,
  STRING = 8,
  ARRAY = 9,
  U64 = 10,
  I64 = 11,
  F64 = 12,
};

// "U32", "STRING", ...; "?" for an id outside the enum.
const char* gguf_value_type_name(GgufValueType t);
bool gguf_type_is_integer(GgufValueType t);  // U8..I64 (not BOOL)
bool gguf_type_is_float(GgufValueType t);    // F32, F64

// One metadata value. Arrays keep numeric elements as their raw little-endian bytes and strings as
// one std::string each, so a 262144-entry tokenizer array is one allocation per string at most.
struct GgufValue {
  GgufValueType type = GgufValueType::U8;
  size_t file_offset = 0;  // where the value's bytes begin in the file (after its key and type)

  // Scalars: every integer type and BOOL in `i`, except U64, which is in `u` (it may exceed int64).
  int64_t i = 0;
  uint64_t u = 0;
  double f = 0;     // F32 and F64
  std::string str;  // STRING

  // ARRAY: element type and count; elements live in exactly one of the vectors below.
  GgufValueType array_type = GgufValueType::U8;
  uint64_t array_count = 0;
  std::vector<uint8_t> array_raw;          // numeric and BOOL elements, as in the file
  std::vector<std::string> array_strings;  // STRING elements
  std::vector<GgufValue> array_values;     // ARRAY elements (one level of nesting only)

  // Element k of a numeric/BOOL array, converted. Caller checks k < array_count and the type.
  int64_t array_int(size_t k) const;  // integer and BOOL elements (U64 wraps; check with array_uint)
  uint64_t array_uint(size_t k) const;
  double array_float(size_t k) const;  // any numeric element
};

struct GgufTensorInfo {
  std::string name;
  uint32_t type = 0;  // GgmlType id, always one ggml_type_info() knows
  int n_dims = 0;
  int64_t ne[4] = {1, 1, 1, 1};  // unused dims are 1
  uint64_t offset = 0;           // relative to the data section
  uint64_t nbytes = 0;
  const uint8_t* data = nullptr;  // data_offset() + offset into the file
};

// The largest file GgufFile::open maps unless told otherwise: far above any model agentkv runs, a
// bound only so that no size is taken on trust.
inline constexpr int64_t kMaxGgufBytes = int64_t(1) << 40;

class GgufFile {
 public:
  // mmap + parse + validate everything. Errors start with "gguf: " (or "cannot open ...": a missing
  // or special file, one over max_bytes).
  static Result<std::unique_ptr<GgufFile>> open(const std::string& path, int64_t max_bytes = kMaxGgufBytes);
  // Parses a buffer the caller keeps alive as long as the GgufFile (tensor data points into it).
  static Result<std::unique_ptr<GgufFile>> parse(const uint8_t* data, size_t size);

  uint32_t version() const { return version_; }

  bool has(std::string_view key) const { return find(key) != nullptr; }
  const GgufValue* find(std::string_view key) const;

  // Typed getters accept any integer value type and range-check into the result type; errors name
  // the key: "gguf: key 'llama.block_count' missing" / "... has type STRING, expected integer".
  Result<int64_t> get_int(std::string_view key) const;
  Result<double> get_float(std::string_view key) const;  // F32/F64 and integers
  Result<std::string> get_string(std::string_view key) const;
  Result<bool> get_bool(std::string_view key) const;  // BOOL, or an integer 0/1
  int64_t get_int_or(std::string_view key, int64_t dflt) const;
  double get_float_or(std::string_view key, double dflt) const;
  bool get_bool_or(std::string_view key, bool dflt) const;
  std::string get_string_or(std::string_view key, std::string dflt) const;
  Result<std::vector<std::string>> get_string_array(std::string_view key) const;
  Result<std::vector<float>> get_float_array(std::string_view key) const;  // float and integer elements
  Result<std::vector<int32_t>> get_int_array(std::string_view key) const;  // integer/BOOL, range-checked

  const std::vector<std::string>& keys() const { return keys_; }  // metadata keys in file order
  // Printable value for an `inspect` dump: strings quoted and escaped (long ones cut), arrays cut
  // after max_array_items with the count. Empty string if the key is absent.
  std::string value_to_string(std::string_view key, size_t max_array_items = 8) const;

  const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }
  const GgufTensorInfo* tensor(std::string_view name) const;  // nullptr if absent

  size_t alignment() const { return alignment_; }
  size_t data_offset() const { return data_offset_; }
  size_t file_size() const { return file_size_; }

  // Whether the U64 value under `key` equals gguf_checksum over this file with that value's own
  // bytes read as zero: agentkv's own formats (KV cache files, transfer maps) seal every byte, header,
  // metadata, tensor infos, padding and data, so no edit anywhere goes unnoticed. Errors name the key.
  Status verify_checksum(std::string_view key) const;

  // The checks an agentkv format's reader opens with, in one place: `version_key` holds `version`
  // (an older one, whose checksum did not cover the whole file, is refused with "re-create it with
  // <remake_with>"), then verify_checksum(checksum_key).
  Status check_sealed_format(std::string_view version_key, int64_t version, std::string_view checksum_key,
                             std::string_view remake_with) const;

 private:
  friend class GgufParser;

  // Heterogeneous lookup so find(string_view) does not build a std::string.
  struct StringHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  using IndexMap = std::unordered_map<std::string, size_t, StringHash, std::equal_to<>>;

  Result<const GgufValue*> require(std::string_view key) const;

  MappedFile file_;  // empty when parse() was given a caller-owned buffer
  const uint8_t* bytes_ = nullptr;  // the whole file, mapped or the caller's
  uint32_t version_ = 0;
  std::vector<std::string> keys_;
  std::vector<GgufValue> values_;  // parallel to keys_
  IndexMap key_index_;
  std::vector<GgufTensorInfo> tensors_;
  IndexMap tensor_index_;
  size_t alignment_ = 32;
  size_t data_offset_ = 0;
  size_t file_size_ = 0;
};

// FNV-1a over bytes[0, size) with the 8 bytes at skip_offset read as zero (where the checksum itself
// lies): one definition for GgufWriter::write_file_checksummed and GgufFile::verify_checksum.
uint64_t gguf_checksum(const uint8_t* bytes, size_t size, size_t skip_offset);

}  // namespace agentkv
