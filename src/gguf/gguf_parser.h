// Internal to the gguf layer: the bounds-checked GGUF v3 parser behind GgufFile::parse/open.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "gguf/gguf_file.h"

namespace agentkv {

class GgufParser {
 public:
  GgufParser(const uint8_t* data, size_t size, GgufFile* out) : d_(data), n_(size), f_(out) {}

  // Fills *out; on failure returns an error "gguf: ..." naming the field.
  Status run();

 private:
  bool parse_header(uint64_t* n_tensors, uint64_t* n_kv);
  bool parse_kv(uint64_t index);
  bool parse_alignment();
  bool parse_tensor_info(uint64_t index);
  bool place_tensors();

  bool read_value(GgufValueType type, GgufValue* v, int depth);
  bool read_array(GgufValue* v, int depth);
  bool read_string(std::string* s, const char* field, uint64_t max_len);
  bool read_u32(uint32_t* v, const char* field);
  bool read_u64(uint64_t* v, const char* field);
  bool read_bytes(void* dst, size_t len, const char* field);
  bool need(uint64_t len, const char* field);

  size_t remaining() const { return n_ - pos_; }
  // Where the cursor is, for error messages: "metadata key #3 (general.name) array element 7".
  std::string where() const;
  bool fail(const std::string& msg);

  const uint8_t* d_;
  size_t n_;
  size_t pos_ = 0;
  GgufFile* f_;
  std::string err_;

  std::string section_ = "header";
  int64_t elem_ = -1;        // array element index while inside an array
  int64_t inner_elem_ = -1;  // element index inside a nested array
};

// Escapes bytes that could break a one-line message and caps the length.
std::string gguf_printable(std::string_view s, size_t max_len = 80);

}  // namespace agentkv
