#include "util/json.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <unordered_map>

namespace agentkv {

Json Json::boolean(bool b) {
  Json j;
  j.type_ = Type::kBool;
  j.b_ = b;
  return j;
}
Json Json::number(double d) {
  Json j;
  j.type_ = Type::kNumber;
  j.num_ = d;
  return j;
}
Json Json::string(std::string s) {
  Json j;
  j.type_ = Type::kString;
  j.str_ = std::move(s);
  return j;
}
Json Json::array(std::vector<Json> items) {
  Json j;
  j.type_ = Type::kArray;
  j.arr_ = std::move(items);
  return j;
}
Json Json::object() {
  Json j;
  j.type_ = Type::kObject;
  return j;
}

const Json* Json::get(std::string_view key) const {
  if (type_ != Type::kObject) return nullptr;
  for (auto& [k, v] : obj_)
    if (k == key) return &v;
  return nullptr;
}

Json& Json::set(std::string key, Json value) {
  for (auto& [k, v] : obj_)
    if (k == key) return v = std::move(value);
  obj_.emplace_back(std::move(key), std::move(value));
  return obj_.back().second;
}

namespace {

// Decodes one UTF-8 sequence at s[i]; returns its length or 0 if invalid.
int utf8_len(std::string_view s, size_t i) {
  const unsigned char c = static_cast<unsigned char>(s[i]);
  int n;
  uint32_t cp;
  if (c < 0x80) return 1;
  if ((c >> 5) == 0x6) n = 2, cp = c & 0x1F;
  else if ((c >> 4) == 0xE) n = 3, cp = c & 0x0F;
  else if ((c >> 3) == 0x1E) n = 4, cp = c & 0x07;
  else return 0;
  if (i + n > s.size()) return 0;
  for (int k = 1; k < n; ++k) {
    const unsigned char cc = static_cast<unsigned char>(s[i + k]);
    if ((cc & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (cc & 0x3F);
  }
  if ((n == 2 && cp < 0x80) || (n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10FFFF)) ||
      (cp >= 0xD800 && cp <= 0xDFFF))
    return 0;
  return n;
}

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += char(cp);
  } else if (cp < 0x800) {
    out += char(0xC0 | (cp >> 6));
    out += char(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += char(0xE0 | (cp >> 12));
    out += char(0x80 | ((cp >> 6) & 0x3F));
    out += char(0x80 | (cp & 0x3F));
  } else {
    out += char(0xF0 | (cp >> 18));
    out += char(0x80 | ((cp >> 12) & 0x3F));
    out += char(0x80 | ((cp >> 6) & 0x3F));
    out += char(0x80 | (cp & 0x3F));
  }
}

}  // namespace

// A friend of Json (not in the anonymous namespace) so that objects with many members can be built
// in linear time; see object().
class JsonParser {
 public:
  JsonParser(std::string_view s, int max_depth) : s_(s), max_depth_(max_depth) {}

  Result<Json> parse_document() {
    Json v;
    if (!value(v, 0)) return make_error(err_);
    skip_ws();
    if (i_ != s_.size()) return make_error(at("unexpected trailing characters"));
    return v;
  }

 private:
  std::string at(const std::string& what) { return "JSON: " + what + " at offset " + std::to_string(i_); }
  bool fail(const std::string& what) {
    if (err_.empty()) err_ = at(what);
    return false;
  }
  void skip_ws() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\t' || s_[i_] == '\n' || s_[i_] == '\r')) ++i_;
  }
  bool literal(const char* word) {
    size_t n = std::char_traits<char>::length(word);
    if (s_.substr(i_, n) != word) return fail("invalid literal");
    i_ += n;
    return true;
  }

  bool value(Json& out, int depth) {
    if (depth > max_depth_) return fail("nesting deeper than " + std::to_string(max_depth_));
    skip_ws();
    if (i_ >= s_.size()) return fail("unexpected end of input");
    const char c = s_[i_];
    if (c == '{') return object(out, depth);
    if (c == '[') return array(out, depth);
    if (c == '"') {
      std::string str;
      if (!string(str)) return false;
      out = Json::string(std::move(str));
      return true;
    }
    if (c == 't') return literal("true") && (out = Json::boolean(true), true);
    if (c == 'f') return literal("false") && (out = Json::boolean(false), true);
    if (c == 'n') return literal("null") && (out = Json::null(), true);
    if (c == '-' || (c >= '0' && c <= '9')) return number(out);
    return fail(std::string("unexpected character '") + c + "'");
  }

  bool number(Json& out) {
    const size_t start = i_;
    if (s_[i_] == '-') ++i_;
    if (i_ >= s_.size()) return fail("bad number");
    if (s_[i_] == '0') {
      ++i_;
    } else if (s_[i_] >= '1' && s_[i_] <= '9') {
      while (i_ < s_.size() && s_[i_] >= '0' && s_[i_] <= '9') ++i_;
    } else {
      return fail("bad number");
    }
    if (i_ < s_.size() && s_[i_] == '.') {
      ++i_;
      if (i_ >= s_.size() || !(s_[i_] >= '0' && s_[i_] <= '9')) return fail("bad number fraction");
      while (i_ < s_.size() && s_[i_] >= '0' && s_[i_] <= '9') ++i_;
    }
    if (i_ < s_.size() && (s_[i_] == 'e' || s_[i_] == 'E')) {
      ++i_;
      if (i_ < s_.size() && (s_[i_] == '+' || s_[i_] == '-')) ++i_;
      if (i_ >= s_.size() || !(s_[i_] >= '0' && s_[i_] <= '9')) return fail("bad number exponent");
      while (i_ < s_.size() && s_[i_] >= '0' && s_[i_] <= '9') ++i_;
    }
    const std::string text(s_.substr(start, i_ - start));
    const double d = std::strtod(text.c_str(), nullptr);
    if (!std::isfinite(d)) return fail("number out of range");
    out = Json::number(d);
    return true;
  }

  bool hex4(uint32_t& v) {
    if (i_ + 4 > s_.size()) return fail("truncated \\u escape");
    v = 0;
    for (int k = 0; k < 4; ++k) {
      const char c = s_[i_++];
      v <<= 4;
      if (c >= '0' && c <= '9') v |= uint32_t(c - '0');
      else if (c >= 'a' && c <= 'f') v |= uint32_t(c - 'a' + 10);
      else if (c >= 'A' && c <= 'F') v |= uint32_t(c - 'A' + 10);
      else return fail("bad hex digit in \\u escape");
    }
    return true;
  }

  bool string(std::string& out) {
    ++i_;  // opening quote
    for (;;) {
      if (i_ >= s_.size()) return fail("unterminated string");
      const unsigned char c = static_cast<unsigned char>(s_[i_]);
      if (c == '"') {
        ++i_;
        return true;
      }
      if (c < 0x20) return fail("control character in string");
      if (c == '\\') {
        if (++i_ >= s_.size()) return fail("unterminated escape");
        const char e = s_[i_++];
        switch (e) {
          case '"': out += '"'; break;
          case '\\': out += '\\'; break;
          case '/': out += '/'; break;
          case 'b': out += '\b'; break;
          case 'f': out += '\f'; break;
          case 'n': out += '\n'; break;
          case 'r': out += '\r'; break;
          case 't': out += '\t'; break;
          case 'u': {
            uint32_t cp;
            if (!hex4(cp)) return false;
            if (cp >= 0xD800 && cp <= 0xDBFF) {
              uint32_t lo;
              if (s_.substr(i_, 2) != "\\u") return fail("unpaired high surrogate");
              i_ += 2;
              if (!hex4(lo)) return false;
              if (lo < 0xDC00 || lo > 0xDFFF) return fail("invalid low surrogate");
              cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
              return fail("unpaired low surrogate");
            }
            append_utf8(out, cp);
            break;
          }
          default: return fail("invalid escape");
        }
        continue;
      }
      const int n = utf8_len(s_, i_);
      if (n == 0) return fail("invalid UTF-8 in string");
      out.append(s_.substr(i_, n));
      i_ += n;
    }
  }

  bool array(Json& out, int depth) {
    ++i_;
    out = Json::array();
    skip_ws();
    if (i_ < s_.size() && s_[i_] == ']') {
      ++i_;
      return true;
    }
    for (;;) {
      Json item;
      if (!value(item, depth + 1)) return false;
      out.push(std::move(item));
      skip_ws();
      if (i_ >= s_.size()) return fail("unterminated array");
      if (s_[i_] == ',') {
        ++i_;
        continue;
      }
      if (s_[i_] == ']') {
        ++i_;
        return true;
      }
      return fail("expected ',' or ']'");
    }
  }

  // A repeated key keeps its first position and takes the last value, as Json::set does. set() scans
  // the members, so a body of ~700k distinct keys (8 MB) took quadratic time (minutes of a core); past
  // a few members a hash index of the keys keeps parsing linear.
  static void add_member(Json& obj, std::string key, Json v, std::unordered_map<std::string, size_t>& index) {
    constexpr size_t kLinearScanMembers = 16;
    auto& members = obj.obj_;
    if (index.empty() && members.size() < kLinearScanMembers) {
      obj.set(std::move(key), std::move(v));
      return;
    }
    if (index.empty()) {
      for (size_t k = 0; k < members.size(); ++k) index.emplace(members[k].first, k);
    }
    const auto [it, inserted] = index.try_emplace(key, members.size());
    if (inserted) {
      members.emplace_back(std::move(key), std::move(v));
    } else {
      members[it->second].second = std::move(v);
    }
  }

  bool object(Json& out, int depth) {
    ++i_;
    out = Json::object();
    std::unordered_map<std::string, size_t> index;  // filled only for objects with many members
    skip_ws();
    if (i_ < s_.size() && s_[i_] == '}') {
      ++i_;
      return true;
    }
    for (;;) {
      skip_ws();
      if (i_ >= s_.size() || s_[i_] != '"') return fail("expected a string key");
      std::string key;
      if (!string(key)) return false;
      skip_ws();
      if (i_ >= s_.size() || s_[i_] != ':') return fail("expected ':'");
      ++i_;
      Json v;
      if (!value(v, depth + 1)) return false;
      add_member(out, std::move(key), std::move(v), index);
      skip_ws();
      if (i_ >= s_.size()) return fail("unterminated object");
      if (s_[i_] == ',') {
        ++i_;
        continue;
      }
      if (s_[i_] == '}') {
        ++i_;
        return true;
      }
      return fail("expected ',' or '}'");
    }
  }

  std::string_view s_;
  size_t i_ = 0;
  int max_depth_;
  std::string err_;
};

namespace {

void dump_to(const Json& j, std::string& out) {
  switch (j.type()) {
    case Json::Type::kNull: out += "null"; break;
    case Json::Type::kBool: out += j.as_bool() ? "true" : "false"; break;
    case Json::Type::kNumber: {
      const double d = j.as_number();
      char buf[32];
      if (d == std::floor(d) && std::fabs(d) < 9e15) std::snprintf(buf, sizeof buf, "%.0f", d);
      else {
        // Shortest of %.15g / %.17g that reads back exactly.
        std::snprintf(buf, sizeof buf, "%.15g", d);
        if (std::strtod(buf, nullptr) != d) std::snprintf(buf, sizeof buf, "%.17g", d);
      }
      out += buf;
      break;
    }
    case Json::Type::kString: json_quote(out, j.as_string()); break;
    case Json::Type::kArray: {
      out += '[';
      bool first = true;
      for (const Json& v : j.items()) {
        if (!first) out += ',';
        first = false;
        dump_to(v, out);
      }
      out += ']';
      break;
    }
    case Json::Type::kObject: {
      out += '{';
      bool first = true;
      for (const auto& [k, v] : j.members()) {
        if (!first) out += ',';
        first = false;
        json_quote(out, k);
        out += ':';
        dump_to(v, out);
      }
      out += '}';
      break;
    }
  }
}

}  // namespace

Result<Json> Json::parse(std::string_view text, int max_depth) { return JsonParser(text, max_depth).parse_document(); }

std::string Json::dump() const {
  std::string out;
  dump_to(*this, out);
  return out;
}

void json_quote(std::string& out, std::string_view s) {
  out += '"';
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c == '"') out += "\\\"";
    else if (c == '\\') out += "\\\\";
    else if (c == '\n') out += "\\n";
    else if (c == '\r') out += "\\r";
    else if (c == '\t') out += "\\t";
    else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else if (c < 0x80) {
      out += char(c);
    } else {
      const int n = utf8_len(s, i);
      if (n == 0) {
        out += "\xEF\xBF\xBD";  // U+FFFD for an invalid byte
        ++i;
        continue;
      }
      out.append(s.substr(i, n));
      i += n;
      continue;
    }
    ++i;
  }
  out += '"';
}

}  // namespace agentkv
