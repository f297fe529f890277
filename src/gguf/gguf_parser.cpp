#include "gguf/gguf_parser.h"

#include <algorithm>
#include <bit>
#include <cstdio>
#include <cstring>
#include <limits>
#include <numeric>

#include "gguf/ggml_types.h"

namespace agentkv {

// Numeric values are copied straight from the file; GGUF is little-endian.
static_assert(std::endian::native == std::endian::little, "agentkv assumes a little-endian host");

namespace {

constexpr uint32_t kGgufMagic = 0x46554747;  // "GGUF" read as a little-endian u32
constexpr uint64_t kMaxKeyLen = 65535;
constexpr uint64_t kMaxTensorNameLen = 64;
// Above this a 64-bit align_up could overflow and no real file uses more.
constexpr uint64_t kMaxAlignment = uint64_t{1} << 30;
// Smallest possible encodings, used to reject counts the remaining bytes cannot hold before
// anything is reserved: kv = key len + 1-byte key + type + 1-byte value; tensor info = name len +
// 1-byte name + n_dims + one dim + type + offset.
constexpr uint64_t kMinKvBytes = 8 + 1 + 4 + 1;
constexpr uint64_t kMinTensorInfoBytes = 8 + 1 + 4 + 8 + 4 + 8;

// Bytes one element of a scalar type takes in the file; 0 for STRING / ARRAY / unknown ids.
size_t scalar_size(GgufValueType t) {
  switch (t) {
    case GgufValueType::U8:
    case GgufValueType::I8:
    case GgufValueType::BOOL:
      return 1;
    case GgufValueType::U16:
    case GgufValueType::I16:
      return 2;
    case GgufValueType::U32:
    case GgufValueType::I32:
    case GgufValueType::F32:
      return 4;
    case GgufValueType::U64:
    case GgufValueType::I64:
    case GgufValueType::F64:
      return 8;
    case GgufValueType::STRING:
    case GgufValueType::ARRAY:
      break;
  }
  return 0;
}

bool known_value_type(uint32_t id) { return id <= static_cast<uint32_t>(GgufValueType::F64); }

bool valid_key(const std::string& k) {
  if (k.empty()) return false;
  for (unsigned char c : k) {
    if (c < 0x21 || c > 0x7e) return false;
  }
  return true;
}

// a * b and a + b for sizes from the file, reporting overflow instead of wrapping.
bool mul_ok(uint64_t a, uint64_t b, uint64_t* out) { return !__builtin_mul_overflow(a, b, out); }
bool add_ok(uint64_t a, uint64_t b, uint64_t* out) { return !__builtin_add_overflow(a, b, out); }

std::string num(uint64_t v) { return std::to_string(v); }

}  // namespace

std::string gguf_printable(std::string_view s, size_t max_len) {
  std::string out;
  for (size_t k = 0; k < s.size() && k < max_len; ++k) {
    unsigned char c = static_cast<unsigned char>(s[k]);
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  if (s.size() > max_len) out += "...(" + num(s.size()) + " bytes)";
  return out;
}

std::string GgufParser::where() const {
  std::string w = section_;
  if (elem_ >= 0) w += " array element " + num(static_cast<uint64_t>(elem_));
  if (inner_elem_ >= 0) w += " inner element " + num(static_cast<uint64_t>(inner_elem_));
  return w;
}

bool GgufParser::fail(const std::string& msg) {
  err_ = "gguf: " + msg;
  return false;
}

bool GgufParser::need(uint64_t len, const char* field) {
  if (len <= remaining()) return true;
  return fail("truncated file while reading " + where() + " " + field + " (need " + num(len) +
              " bytes at offset " + num(pos_) + ", file size " + num(n_) + ")");
}

bool GgufParser::read_bytes(void* dst, size_t len, const char* field) {
  if (!need(len, field)) return false;
  if (len == 0) return true;  // dst may be an empty vector's null data()
  std::memcpy(dst, d_ + pos_, len);
  pos_ += len;
  return true;
}

bool GgufParser::read_u32(uint32_t* v, const char* field) { return read_bytes(v, sizeof *v, field); }
bool GgufParser::read_u64(uint64_t* v, const char* field) { return read_bytes(v, sizeof *v, field); }

bool GgufParser::read_string(std::string* s, const char* field, uint64_t max_len) {
  std::string len_field = std::string(field) + " length";
  uint64_t len = 0;
  if (!read_u64(&len, len_field.c_str())) return false;
  if (len > max_len) {
    return fail(where() + " " + len_field + " " + num(len) + " exceeds the limit " + num(max_len));
  }
  if (len > remaining()) {
    // Longer than the whole file: a corrupt length; otherwise the file was most likely cut short.
    std::string prefix = len > n_ ? "absurd string length " + num(len) + " for "
                                  : "truncated file while reading (string length " + num(len) + ") ";
    return fail(prefix + where() + " " + field + " (only " + num(remaining()) + " bytes remain at offset " +
                num(pos_) + ")");
  }
  s->assign(reinterpret_cast<const char*>(d_ + pos_), len);
  pos_ += len;
  return true;
}

bool GgufParser::read_value(GgufValueType type, GgufValue* v, int depth) {
  v->type = type;
  switch (type) {
    case GgufValueType::STRING:
      return read_string(&v->str, "string", std::numeric_limits<uint64_t>::max());
    case GgufValueType::ARRAY:
      return read_array(v, depth);
    default:
      break;
  }
  // Scalars: read the raw little-endian bytes into the matching C++ type, then widen.
  uint8_t raw[8] = {};
  if (!read_bytes(raw, scalar_size(type), "value")) return false;
  auto as = [&raw]<class T>(T) {
    T x;
    std::memcpy(&x, raw, sizeof x);
    return x;
  };
  switch (type) {
    case GgufValueType::U8:
      v->i = as(uint8_t{});
      break;
    case GgufValueType::I8:
      v->i = as(int8_t{});
      break;
    case GgufValueType::U16:
      v->i = as(uint16_t{});
      break;
    case GgufValueType::I16:
      v->i = as(int16_t{});
      break;
    case GgufValueType::U32:
      v->i = as(uint32_t{});
      break;
    case GgufValueType::I32:
      v->i = as(int32_t{});
      break;
    case GgufValueType::I64:
      v->i = as(int64_t{});
      break;
    case GgufValueType::U64:
      v->u = as(uint64_t{});
      v->i = static_cast<int64_t>(v->u);
      break;
    case GgufValueType::F32:
      v->f = as(float{});
      break;
    case GgufValueType::F64:
      v->f = as(double{});
      break;
    case GgufValueType::BOOL:
      if (raw[0] > 1) return fail(where() + " bool value " + num(raw[0]) + " is not 0 or 1");
      v->i = raw[0];
      break;
    default:
      break;
  }
  return true;
}

bool GgufParser::read_array(GgufValue* v, int depth) {
  uint32_t elem_type = 0;
  if (!read_u32(&elem_type, "array element type")) return false;
  if (!known_value_type(elem_type)) {
    return fail(where() + " has unknown array element type id " + num(elem_type));
  }
  auto et = static_cast<GgufValueType>(elem_type);
  // The spec allows arrays of arrays; agentkv supports one level, which no known file exceeds.
  if (et == GgufValueType::ARRAY && depth >= 1) {
    return fail(where() + " has arrays nested more than two deep (not supported)");
  }
  uint64_t count = 0;
  if (!read_u64(&count, "array count")) return false;
  size_t min_elem = scalar_size(et);
  if (et == GgufValueType::STRING) min_elem = 8;
  if (et == GgufValueType::ARRAY) min_elem = 4 + 8;
  if (count > remaining() / min_elem) {
    return fail(where() + " array count " + num(count) + " of " + gguf_value_type_name(et) +
                " cannot fit in the remaining " + num(remaining()) + " bytes");
  }
  v->array_type = et;
  v->array_count = count;
  auto set_index = [&](uint64_t k) { (depth == 0 ? elem_ : inner_elem_) = static_cast<int64_t>(k); };
  if (et == GgufValueType::STRING) {
    v->array_strings.resize(count);
    for (uint64_t k = 0; k < count; ++k) {
      set_index(k);
      if (!read_string(&v->array_strings[k], "string", std::numeric_limits<uint64_t>::max())) return false;
    }
  } else if (et == GgufValueType::ARRAY) {
    v->array_values.resize(count);
    for (uint64_t k = 0; k < count; ++k) {
      set_index(k);
      v->array_values[k].type = GgufValueType::ARRAY;
      if (!read_array(&v->array_values[k], depth + 1)) return false;
    }
  } else {
    v->array_raw.resize(count * min_elem);
    if (!read_bytes(v->array_raw.data(), v->array_raw.size(), "array data")) return false;
    if (et == GgufValueType::BOOL) {
      for (uint64_t k = 0; k < count; ++k) {
        if (v->array_raw[k] > 1) {
          set_index(k);
          return fail(where() + " bool value " + num(v->array_raw[k]) + " is not 0 or 1");
        }
      }
    }
  }
  set_index(static_cast<uint64_t>(-1));
  return true;
}

bool GgufParser::parse_header(uint64_t* n_tensors, uint64_t* n_kv) {
  uint32_t magic = 0, version = 0;
  if (!read_u32(&magic, "magic")) return false;
  if (magic != kGgufMagic) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "bad magic 0x%08x (expected 0x%08x \"GGUF\")", magic, kGgufMagic);
    return fail(buf);
  }
  if (!read_u32(&version, "version")) return false;
  if (version != 3) return fail("unsupported version " + num(version) + " (only version 3 is supported)");
  f_->version_ = version;
  if (!read_u64(n_tensors, "tensor_count") || !read_u64(n_kv, "kv_count")) return false;
  if (*n_kv > remaining() / kMinKvBytes) {
    return fail("kv_count " + num(*n_kv) + " cannot fit in file size " + num(n_));
  }
  if (*n_tensors > remaining() / kMinTensorInfoBytes) {
    return fail("tensor_count " + num(*n_tensors) + " cannot fit in file size " + num(n_));
  }
  return true;
}

bool GgufParser::parse_kv(uint64_t index) {
  section_ = "metadata key #" + num(index);
  std::string key;
  if (!read_string(&key, "key", kMaxKeyLen)) return false;
  if (!valid_key(key)) {
    return fail(section_ + " '" + gguf_printable(key) + "' is not a valid key (printable ASCII, no spaces)");
  }
  section_ += " (" + key + ")";
  auto [it, inserted] = f_->key_index_.emplace(key, f_->keys_.size());
  if (!inserted) {
    return fail("duplicate metadata key '" + key + "' (#" + num(it->second) + " and #" + num(index) + ")");
  }
  uint32_t type = 0;
  if (!read_u32(&type, "value type")) return false;
  if (!known_value_type(type)) return fail(section_ + " has unknown value type id " + num(type));
  f_->keys_.push_back(std::move(key));
  f_->values_.emplace_back();
  f_->values_.back().file_offset = pos_;
  return read_value(static_cast<GgufValueType>(type), &f_->values_.back(), 0);
}

bool GgufParser::parse_alignment() {
  const GgufValue* v = f_->find("general.alignment");
  if (v == nullptr) return true;
  if (!gguf_type_is_integer(v->type)) {
    return fail(std::string("general.alignment has type ") + gguf_value_type_name(v->type) +
                ", expected integer");
  }
  bool negative = v->type != GgufValueType::U64 && v->i < 0;
  uint64_t a = v->type == GgufValueType::U64 ? v->u : static_cast<uint64_t>(v->i);
  if (negative || a == 0 || !std::has_single_bit(a) || a > kMaxAlignment) {
    return fail("general.alignment " + std::to_string(v->i) + " is not a power of two in 1.." +
                num(kMaxAlignment));
  }
  f_->alignment_ = a;
  return true;
}

bool GgufParser::parse_tensor_info(uint64_t index) {
  section_ = "tensor info #" + num(index);
  GgufTensorInfo t;
  if (!read_string(&t.name, "name", kMaxTensorNameLen)) return false;
  if (t.name.empty()) return fail(section_ + " has an empty name");
  std::string tn = "tensor '" + gguf_printable(t.name) + "'";
  section_ += " (" + tn + ")";
  uint32_t n_dims = 0;
  if (!read_u32(&n_dims, "n_dims")) return false;
  if (n_dims < 1 || n_dims > 4) return fail(tn + " n_dims " + num(n_dims) + " is outside 1..4");
  t.n_dims = static_cast<int>(n_dims);
  for (uint32_t d = 0; d < n_dims; ++d) {
    std::string field = "ne[" + num(d) + "]";
    uint64_t ne = 0;
    if (!read_u64(&ne, field.c_str())) return false;
    if (ne < 1 || ne > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return fail(tn + " dimension " + field + " = " + num(ne) + " is outside 1..2^63-1");
    }
    t.ne[d] = static_cast<int64_t>(ne);
  }
  if (!read_u32(&t.type, "type") || !read_u64(&t.offset, "offset")) return false;
  const GgmlTypeInfo* ti = ggml_type_info(t.type);
  if (ti == nullptr) return fail(tn + " has unknown type id " + num(t.type));
  uint64_t ne0 = static_cast<uint64_t>(t.ne[0]);
  if (ne0 % static_cast<uint64_t>(ti->block_elems) != 0) {
    return fail(tn + " ne[0] = " + num(ne0) + " is not a multiple of the " + ti->name + " block size " +
                num(static_cast<uint64_t>(ti->block_elems)));
  }
  // nbytes = rows * (blocks per row * block bytes); the element count must not overflow either.
  uint64_t elems = 1, bytes = 0;
  bool ok =
      mul_ok(ne0 / static_cast<uint64_t>(ti->block_elems), static_cast<uint64_t>(ti->block_bytes), &bytes);
  for (int d = 0; d < 4 && ok; ++d) ok = mul_ok(elems, static_cast<uint64_t>(t.ne[d]), &elems);
  for (int d = 1; d < 4 && ok; ++d) ok = mul_ok(bytes, static_cast<uint64_t>(t.ne[d]), &bytes);
  if (!ok || elems > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    return fail(tn + " dimension product overflows");
  }
  t.nbytes = bytes;
  auto [it, inserted] = f_->tensor_index_.emplace(t.name, f_->tensors_.size());
  if (!inserted) {
    return fail("duplicate tensor name '" + gguf_printable(t.name) + "' (tensor infos #" + num(it->second) +
                " and #" + num(index) + ")");
  }
  f_->tensors_.push_back(std::move(t));
  return true;
}

bool GgufParser::place_tensors() {
  uint64_t a = f_->alignment_;
  f_->data_offset_ = pos_ + (a - pos_ % a) % a;
  uint64_t data_size = f_->data_offset_ < n_ ? n_ - f_->data_offset_ : 0;
  for (GgufTensorInfo& t : f_->tensors_) {
    std::string tn = "tensor '" + gguf_printable(t.name) + "'";
    if (t.offset % a != 0) {
      return fail(tn + " offset " + num(t.offset) + " not a multiple of alignment " + num(a));
    }
    if (t.offset > data_size || t.nbytes > data_size - t.offset) {
      uint64_t begin = 0, end = 0;
      if (add_ok(f_->data_offset_, t.offset, &begin) && add_ok(begin, t.nbytes, &end)) {
        return fail(tn + " data [" + num(begin) + ", " + num(end) + ") past end of file (size " + num(n_) +
                    ")");
      }
      return fail(tn + " offset " + num(t.offset) + " + size " + num(t.nbytes) + " past end of file (size " +
                  num(n_) + ")");
    }
    t.data = d_ + f_->data_offset_ + t.offset;
  }
  // Overlap check on tensors sorted by offset: each must end before the next begins.
  std::vector<size_t> order(f_->tensors_.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::sort(order.begin(), order.end(),
            [&](size_t x, size_t y) { return f_->tensors_[x].offset < f_->tensors_[y].offset; });
  for (size_t k = 1; k < order.size(); ++k) {
    const GgufTensorInfo& p = f_->tensors_[order[k - 1]];
    const GgufTensorInfo& q = f_->tensors_[order[k]];
    if (p.offset + p.nbytes > q.offset) {
      return fail("tensors '" + gguf_printable(p.name) + "' and '" + gguf_printable(q.name) + "' overlap");
    }
  }
  return true;
}

Status GgufParser::run() {
  f_->file_size_ = n_;
  uint64_t n_tensors = 0, n_kv = 0;
  bool ok = parse_header(&n_tensors, &n_kv);
  if (ok) {
    // Counts were checked against the file size above, so these reservations are bounded.
    f_->keys_.reserve(n_kv);
    f_->values_.reserve(n_kv);
    f_->tensors_.reserve(n_tensors);
  }
  for (uint64_t k = 0; ok && k < n_kv; ++k) ok = parse_kv(k);
  ok = ok && parse_alignment();
  for (uint64_t k = 0; ok && k < n_tensors; ++k) ok = parse_tensor_info(k);
  ok = ok && place_tensors();
  if (!ok) return make_error(ErrorCode::kDataLoss, err_);  // the bytes are not a valid GGUF
  return Status();
}

}  // namespace agentkv
