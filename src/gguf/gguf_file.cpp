#include "gguf/gguf_file.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include "gguf/gguf_parser.h"
#include "util/fnv_hash.h"

namespace agentkv {

namespace {

template <class T>
T load(const uint8_t* p) {
  T x;
  std::memcpy(&x, p, sizeof x);
  return x;
}

std::string quoted(std::string_view s) {
  // Appending rather than operator+ chains: g++ 12 raises a false -Wrestrict on the latter.
  std::string out(1, '"');
  out += gguf_printable(s, 200);
  out += '"';
  return out;
}

// Scalar printed as in `inspect`; arrays are handled by the caller.
std::string scalar_to_string(const GgufValue& v) {
  switch (v.type) {
    case GgufValueType::BOOL:
      return v.i != 0 ? "true" : "false";
    case GgufValueType::U64:
      return std::to_string(v.u);
    case GgufValueType::F32:
    case GgufValueType::F64: {
      char buf[32];
      std::snprintf(buf, sizeof buf, "%.9g", v.f);
      return buf;
    }
    case GgufValueType::STRING:
      return quoted(v.str);
    default:
      return std::to_string(v.i);
  }
}

GgufValue array_element(const GgufValue& arr, size_t k) {
  GgufValue e;
  e.type = arr.array_type;
  if (arr.array_type == GgufValueType::STRING) {
    e.str = arr.array_strings[k];
  } else if (arr.array_type == GgufValueType::U64) {
    e.u = arr.array_uint(k);
  } else if (gguf_type_is_float(arr.array_type)) {
    e.f = arr.array_float(k);
  } else {
    e.i = arr.array_int(k);
  }
  return e;
}

std::string array_to_string(const GgufValue& v, size_t max_items) {
  std::string out = "[";
  size_t shown = v.array_count < max_items ? static_cast<size_t>(v.array_count) : max_items;
  for (size_t k = 0; k < shown; ++k) {
    if (k > 0) out += ", ";
    out += v.array_type == GgufValueType::ARRAY ? array_to_string(v.array_values[k], max_items)
                                                : scalar_to_string(array_element(v, k));
  }
  if (shown < v.array_count) out += ", ... (" + std::to_string(v.array_count) + " items)";
  return out + "]";
}

// Integer view of a scalar or array element, with a flag for a U64 beyond int64.
struct IntView {
  int64_t value;
  bool too_big;
};

IntView int_of(GgufValueType t, int64_t i, uint64_t u) {
  if (t == GgufValueType::U64) {
    return {static_cast<int64_t>(u), u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())};
  }
  return {i, false};
}

Error type_error(std::string_view key, GgufValueType have, const char* want) {
  return make_error("gguf: key '" + std::string(key) + "' has type " + gguf_value_type_name(have) +
                    ", expected " + want);
}

}  // namespace

const char* gguf_value_type_name(GgufValueType t) {
  static const char* const kNames[] = {"U8",   "I8",     "U16",   "I16", "U32", "I32", "F32",
                                       "BOOL", "STRING", "ARRAY", "U64", "I64", "F64"};
  auto id = static_cast<uint32_t>(t);
  return id < sizeof kNames / sizeof kNames[0] ? kNames[id] : "?";
}

bool gguf_type_is_integer(GgufValueType t) {
  switch (t) {
    case GgufValueType::U8:
    case GgufValueType::I8:
    case GgufValueType::U16:
    case GgufValueType::I16:
    case GgufValueType::U32:
    case GgufValueType::I32:
    case GgufValueType::U64:
    case GgufValueType::I64:
      return true;
    default:
      return false;
  }
}

bool gguf_type_is_float(GgufValueType t) { return t == GgufValueType::F32 || t == GgufValueType::F64; }

int64_t GgufValue::array_int(size_t k) const {
  const uint8_t* p = array_raw.data();
  switch (array_type) {
    case GgufValueType::U8:
    case GgufValueType::BOOL:
      return p[k];
    case GgufValueType::I8:
      return load<int8_t>(p + k);
    case GgufValueType::U16:
      return load<uint16_t>(p + 2 * k);
    case GgufValueType::I16:
      return load<int16_t>(p + 2 * k);
    case GgufValueType::U32:
      return load<uint32_t>(p + 4 * k);
    case GgufValueType::I32:
      return load<int32_t>(p + 4 * k);
    case GgufValueType::U64:
      return static_cast<int64_t>(load<uint64_t>(p + 8 * k));
    case GgufValueType::I64:
      return load<int64_t>(p + 8 * k);
    case GgufValueType::F32:
      return static_cast<int64_t>(load<float>(p + 4 * k));
    case GgufValueType::F64:
      return static_cast<int64_t>(load<double>(p + 8 * k));
    default:
      return 0;
  }
}

uint64_t GgufValue::array_uint(size_t k) const {
  if (array_type == GgufValueType::U64) return load<uint64_t>(array_raw.data() + 8 * k);
  return static_cast<uint64_t>(array_int(k));
}

double GgufValue::array_float(size_t k) const {
  if (array_type == GgufValueType::F32) return load<float>(array_raw.data() + 4 * k);
  if (array_type == GgufValueType::F64) return load<double>(array_raw.data() + 8 * k);
  if (array_type == GgufValueType::U64) return static_cast<double>(array_uint(k));
  return static_cast<double>(array_int(k));
}

Result<std::unique_ptr<GgufFile>> GgufFile::open(const std::string& path, int64_t max_bytes) {
  auto mapped = MappedFile::open(path, max_bytes);
  if (!mapped.ok()) return std::move(mapped).take_error();
  auto f = std::unique_ptr<GgufFile>(new GgufFile());
  f->file_ = std::move(mapped.value());
  f->bytes_ = f->file_.data();
  Status st = GgufParser(f->file_.data(), f->file_.size(), f.get()).run();
  if (!st.ok()) return make_error(st.code(), st.error() + " in " + path);
  return f;
}

Result<std::unique_ptr<GgufFile>> GgufFile::parse(const uint8_t* data, size_t size) {
  auto f = std::unique_ptr<GgufFile>(new GgufFile());
  f->bytes_ = data;
  Status st = GgufParser(data, size, f.get()).run();
  if (!st.ok()) return st.status_error();
  return f;
}

uint64_t gguf_checksum(const uint8_t* bytes, size_t size, size_t skip_offset) {
  Fnv1a h;
  const size_t head = std::min(skip_offset, size);
  h.mix(bytes, head);
  const uint8_t zeros[8] = {};
  h.mix(zeros, sizeof zeros);
  if (head + 8 < size) h.mix(bytes + head + 8, size - head - 8);
  return h.value();
}

Status GgufFile::verify_checksum(std::string_view key) const {
  const GgufValue* v = find(key);
  if (v == nullptr || v->type != GgufValueType::U64)
    return make_error(ErrorCode::kDataLoss, "key '" + std::string(key) + "' (U64 checksum) missing");
  if (gguf_checksum(bytes_, file_size_, v->file_offset) != v->u)
    return make_error(ErrorCode::kDataLoss, "checksum mismatch ('" + std::string(key) +
                                                "'): the file is corrupted or was edited");
  return Status();
}

Status GgufFile::check_sealed_format(std::string_view version_key, int64_t version, std::string_view checksum_key,
                                     std::string_view remake_with) const {
  const int64_t v = get_int_or(version_key, -1);
  if (v >= 1 && v < version)
    return make_error("written by an older agentkv (format version " + std::to_string(v) +
                      ", whose checksum did not cover the whole file); re-create it with " + std::string(remake_with));
  if (v != version) return make_error("unsupported format version " + std::to_string(v));
  return verify_checksum(checksum_key);
}

const GgufValue* GgufFile::find(std::string_view key) const {
  auto it = key_index_.find(key);
  return it == key_index_.end() ? nullptr : &values_[it->second];
}

const GgufTensorInfo* GgufFile::tensor(std::string_view name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

Result<const GgufValue*> GgufFile::require(std::string_view key) const {
  const GgufValue* v = find(key);
  if (v == nullptr) return make_error("gguf: key '" + std::string(key) + "' missing");
  return v;
}

Result<int64_t> GgufFile::get_int(std::string_view key) const {
  auto v = require(key);
  if (!v.ok()) return std::move(v).take_error();
  const GgufValue& x = **v;
  if (!gguf_type_is_integer(x.type)) return type_error(key, x.type, "integer");
  IntView iv = int_of(x.type, x.i, x.u);
  if (iv.too_big) {
    return make_error("gguf: key '" + std::string(key) + "' value " + std::to_string(x.u) +
                      " does not fit in int64");
  }
  return iv.value;
}

Result<double> GgufFile::get_float(std::string_view key) const {
  auto v = require(key);
  if (!v.ok()) return std::move(v).take_error();
  const GgufValue& x = **v;
  if (gguf_type_is_float(x.type)) return x.f;
  if (x.type == GgufValueType::U64) return static_cast<double>(x.u);
  if (gguf_type_is_integer(x.type)) return static_cast<double>(x.i);
  return type_error(key, x.type, "float");
}

Result<std::string> GgufFile::get_string(std::string_view key) const {
  auto v = require(key);
  if (!v.ok()) return std::move(v).take_error();
  if ((*v)->type != GgufValueType::STRING) return type_error(key, (*v)->type, "STRING");
  return (*v)->str;
}

Result<bool> GgufFile::get_bool(std::string_view key) const {
  auto v = require(key);
  if (!v.ok()) return std::move(v).take_error();
  const GgufValue& x = **v;
  if (x.type == GgufValueType::BOOL) return x.i != 0;
  if (gguf_type_is_integer(x.type)) {
    IntView iv = int_of(x.type, x.i, x.u);
    if (!iv.too_big && (iv.value == 0 || iv.value == 1)) return iv.value == 1;
    return make_error("gguf: key '" + std::string(key) + "' integer value is not 0 or 1, expected bool");
  }
  return type_error(key, x.type, "BOOL");
}

int64_t GgufFile::get_int_or(std::string_view key, int64_t dflt) const {
  auto r = get_int(key);
  return r.ok() ? *r : dflt;
}

double GgufFile::get_float_or(std::string_view key, double dflt) const {
  auto r = get_float(key);
  return r.ok() ? *r : dflt;
}

bool GgufFile::get_bool_or(std::string_view key, bool dflt) const {
  auto r = get_bool(key);
  return r.ok() ? *r : dflt;
}

std::string GgufFile::get_string_or(std::string_view key, std::string dflt) const {
  auto r = get_string(key);
  return r.ok() ? std::move(r).value() : dflt;
}

namespace {

// The array under `key`, or an error when missing / not an array / wrong element kind.
template <class Pred>
Result<const GgufValue*> array_of(const GgufValue* v, std::string_view key, Pred elem_ok, const char* want) {
  if (v == nullptr) return make_error("gguf: key '" + std::string(key) + "' missing");
  if (v->type != GgufValueType::ARRAY) return type_error(key, v->type, want);
  if (!elem_ok(v->array_type)) {
    return make_error("gguf: key '" + std::string(key) + "' is an array of " +
                      gguf_value_type_name(v->array_type) + ", expected " + want);
  }
  return v;
}

}  // namespace

Result<std::vector<std::string>> GgufFile::get_string_array(std::string_view key) const {
  auto a = array_of(
      find(key), key, [](GgufValueType t) { return t == GgufValueType::STRING; }, "array of STRING");
  if (!a.ok()) return std::move(a).take_error();
  return (*a)->array_strings;
}

Result<std::vector<float>> GgufFile::get_float_array(std::string_view key) const {
  auto a = array_of(
      find(key), key, [](GgufValueType t) { return gguf_type_is_float(t) || gguf_type_is_integer(t); },
      "array of numbers");
  if (!a.ok()) return std::move(a).take_error();
  const GgufValue& v = **a;
  std::vector<float> out(v.array_count);
  for (size_t k = 0; k < out.size(); ++k) out[k] = static_cast<float>(v.array_float(k));
  return out;
}

Result<std::vector<int32_t>> GgufFile::get_int_array(std::string_view key) const {
  auto a = array_of(
      find(key), key, [](GgufValueType t) { return gguf_type_is_integer(t) || t == GgufValueType::BOOL; },
      "array of integers");
  if (!a.ok()) return std::move(a).take_error();
  const GgufValue& v = **a;
  std::vector<int32_t> out(v.array_count);
  for (size_t k = 0; k < out.size(); ++k) {
    IntView iv = int_of(v.array_type, v.array_int(k), v.array_uint(k));
    if (iv.too_big || iv.value < std::numeric_limits<int32_t>::min() ||
        iv.value > std::numeric_limits<int32_t>::max()) {
      return make_error("gguf: key '" + std::string(key) + "' element " + std::to_string(k) +
                        " does not fit in int32");
    }
    out[k] = static_cast<int32_t>(iv.value);
  }
  return out;
}

std::string GgufFile::value_to_string(std::string_view key, size_t max_array_items) const {
  const GgufValue* v = find(key);
  if (v == nullptr) return "";
  return v->type == GgufValueType::ARRAY ? array_to_string(*v, max_array_items) : scalar_to_string(*v);
}

}  // namespace agentkv
