// JSON in agentkv is nlohmann::ordered_json (Debian nlohmann-json3-dev), used directly: members keep
// their insertion order, integers are exact int64 / uint64 (a seed or a token id never passes through a
// double), doubles print shortest round-trip. This header adds only what the project needs on top:
//  - parse_json: a bounded, never-throwing parser for untrusted text (request bodies, files);
//  - dump_json:  a never-throwing writer that never writes NaN or Inf;
//  - json_longest_array: a pass that builds nothing, to refuse a body before its tree is built.
#pragma once

#include <algorithm>
#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "util/excerpt.h"
#include "util/status.h"

namespace agentkv {

using Json = nlohmann::ordered_json;

// Parses one JSON document, strictly (RFC 8259): UTF-8 is validated, lone surrogate escapes, trailing
// text and numbers that overflow a double (1e999) are errors, and a value nested deeper than max_depth
// (the top level is depth 0) is an error that says "nesting". A key given twice in one object is an
// error that names it (RFC 8259 leaves the meaning open; parsers disagree on which value wins, so a
// request or file that depends on one is refused rather than guessed at). Linear in the input, however
// many keys an object has. Never throws; the error names the problem and the byte offset, and quotes
// input only as an excerpt (util/excerpt.h).
Result<Json> parse_json(std::string_view text, int max_depth = 64);

// The element count of the longest array in `text`, counted by a SAX pass that builds no values
// (memory in the nesting depth only), stopping at limit + 1 once an array passes `limit`. A tree of
// a JSON array costs 16-48 bytes per element however short its text ("1," is 2 bytes), so a server
// scans a large body with this before parse_json. Malformed text counts what came before the error
// (parse_json reports it); nesting deeper than 256 stops the count there.
size_t json_longest_array(std::string_view text, size_t limit);

// Compact text of j. A non-finite number (NaN, Inf) is written as null, never as nan/inf: JSON has no
// such numbers, and a reply must not be lost for one missing metric. Invalid UTF-8 in a string is
// written as U+FFFD (a token's text can end inside a character). Never throws.
inline std::string dump_json(const Json& j) { return j.dump(-1, ' ', false, Json::error_handler_t::replace); }

// j as Python's json.dumps(j, ensure_ascii=False) writes it, which is what the `tojson` filter of
// Hugging Face chat templates writes (tokenizer/chat_format_*.cpp render those templates natively):
// ", " between items and ": " after keys, members in their order; with indent >= 0, one item a line,
// indented by `indent` spaces a level ("," at line ends), and empty containers as {} and []. Scalars are
// dump_json's (integers exact; a double can differ from Python's repr in the last form, e.g. 1e15).
std::string dump_json_python(const Json& j, int indent = -1);

// The member `key` of object j; nullptr when j is not an object or has no such member.
inline const Json* json_member(const Json& j, std::string_view key) {
  if (!j.is_object()) return nullptr;
  const auto it = j.find(key);
  return it == j.end() ? nullptr : &*it;
}

// Reads a typed value (a from_json or NLOHMANN_DEFINE_TYPE_* type) from j; a missing member or a wrong
// type is an error naming `what` (a file, a field), not an exception.
template <class T>
Result<T> json_to(const Json& j, const std::string& what) {
  try {
    return j.get<T>();
  } catch (const Json::exception& e) {
    return make_error(what + ": " + e.what());
  }
}

}  // namespace agentkv

// NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE for Json: nlohmann 3.11.2 (Debian 12) binds that macro to
// nlohmann::json only (3.11.3 made it generic), so this one is the same thing for ordered_json. Put
// it in the type's namespace; it writes the fields in the order listed, under their C++ names, and
// reading needs every one.
#define AGENTKV_JSON_FIELDS(Type, ...)                                                                  \
  inline void to_json(::agentkv::Json& nlohmann_json_j, const Type& nlohmann_json_t) {                   \
    NLOHMANN_JSON_EXPAND(NLOHMANN_JSON_PASTE(NLOHMANN_JSON_TO, __VA_ARGS__))                            \
  }                                                                                                     \
  inline void from_json(const ::agentkv::Json& nlohmann_json_j, Type& nlohmann_json_t) {                 \
    NLOHMANN_JSON_EXPAND(NLOHMANN_JSON_PASTE(NLOHMANN_JSON_FROM, __VA_ARGS__))                          \
  }

namespace agentkv {

namespace json_detail {

// The SAX handler behind parse_json: nlohmann's own DOM builder has no depth limit and, on an
// ordered_json, looks every key up with a linear scan (quadratic in the keys of one object), so this
// one bounds the depth and indexes the keys of large objects.
class BoundedBuilder {
 public:
  explicit BoundedBuilder(int max_depth) : max_depth_(max_depth) {}

  bool null() { return put(Json()); }
  bool boolean(bool v) { return put(Json(v)); }
  bool number_integer(Json::number_integer_t v) { return put(Json(v)); }
  bool number_unsigned(Json::number_unsigned_t v) { return put(Json(v)); }
  bool number_float(Json::number_float_t v, const std::string&) { return put(Json(v)); }
  bool string(std::string& v) { return put(Json(std::move(v))); }
  bool binary(Json::binary_t&) { return fail("binary values are not JSON"); }
  bool start_object(std::size_t) { return open(Json::object()); }
  bool start_array(std::size_t) { return open(Json::array()); }
  bool end_object() { return close(); }
  bool end_array() { return close(); }

  bool key(std::string& k) {
    constexpr std::size_t kLinearScanMembers = 16;
    Frame& f = stack_.back();
    auto& members = static_cast<Json::object_t::Container&>(f.value->get_ref<Json::object_t&>());
    if (f.index.empty() && members.size() >= kLinearScanMembers)
      for (std::size_t i = 0; i < members.size(); ++i) f.index.emplace(members[i].first, i);
    bool repeated = false;
    if (!f.index.empty()) {
      repeated = !f.index.try_emplace(k, members.size()).second;
    } else {
      for (std::size_t i = 0; i < members.size() && !repeated; ++i) repeated = members[i].first == k;
    }
    if (repeated) return fail("duplicate key '" + excerpt(k) + "'");
    members.emplace_back(std::move(k), Json());
    slot_ = &members.back().second;
    return true;
  }

  bool parse_error(std::size_t offset, const std::string&, const nlohmann::detail::exception& e) {
    std::string what = e.what();
    if (const auto p = what.find("] "); p != std::string::npos) what.erase(0, p + 2);  // nlohmann's id
    // nlohmann quotes the token it last read, which may be a megabyte-long string.
    const std::string_view read = "; last read: '";
    if (const auto p = what.find(read); p != std::string::npos)
      what = what.substr(0, p + read.size()) + excerpt(std::string_view(what).substr(p + read.size()));
    error_ = "JSON: " + what + " (at byte offset " + std::to_string(offset) + ")";
    return false;
  }

  Json& root() { return root_; }
  const std::string& error() const { return error_; }

 private:
  struct Frame {
    Json* value;
    std::unordered_map<std::string, std::size_t> index;  // filled only for objects with many members
  };

  bool fail(std::string what) {
    error_ = "JSON: " + std::move(what);
    return false;
  }
  // Places v where the next value goes; returns where it now lives.
  Json* place(Json v) {
    if (stack_.empty()) return &(root_ = std::move(v));
    Json& top = *stack_.back().value;
    if (top.is_array()) {
      top.get_ref<Json::array_t&>().push_back(std::move(v));
      return &top.get_ref<Json::array_t&>().back();
    }
    return &(*slot_ = std::move(v));
  }
  bool put(Json v) {
    if (int(stack_.size()) > max_depth_) return fail("nesting deeper than " + std::to_string(max_depth_));
    place(std::move(v));
    return true;
  }
  bool open(Json v) {
    if (int(stack_.size()) > max_depth_) return fail("nesting deeper than " + std::to_string(max_depth_));
    stack_.push_back(Frame{place(std::move(v)), {}});
    return true;
  }
  bool close() {
    stack_.pop_back();
    return true;
  }

  int max_depth_;
  Json root_;
  std::vector<Frame> stack_;
  Json* slot_ = nullptr;  // the member the next value of the innermost object goes to
  std::string error_;
};

// json_longest_array's handler: one count per open array or object (objects' are not counted).
class ArrayCounter {
 public:
  explicit ArrayCounter(size_t limit) : limit_(limit) {}
  bool null() { return value(); }
  bool boolean(bool) { return value(); }
  bool number_integer(Json::number_integer_t) { return value(); }
  bool number_unsigned(Json::number_unsigned_t) { return value(); }
  bool number_float(Json::number_float_t, const std::string&) { return value(); }
  bool string(std::string&) { return value(); }
  bool binary(Json::binary_t&) { return false; }
  bool start_object(std::size_t) { return open(false); }
  bool start_array(std::size_t) { return open(true); }
  bool end_object() { return close(); }
  bool end_array() { return close(); }
  bool key(std::string&) { return true; }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) { return false; }
  size_t longest() const { return longest_; }

 private:
  struct Open {
    bool array;
    size_t count;
  };
  bool value() {
    if (stack_.empty() || !stack_.back().array) return true;
    longest_ = std::max(longest_, ++stack_.back().count);
    return longest_ <= limit_;
  }
  bool open(bool array) {
    if (!value() || stack_.size() >= 256) return false;
    stack_.push_back(Open{array, 0});
    return true;
  }
  bool close() {
    stack_.pop_back();
    return true;
  }
  size_t limit_, longest_ = 0;
  std::vector<Open> stack_;
};

}  // namespace json_detail

inline size_t json_longest_array(std::string_view text, size_t limit) {
  json_detail::ArrayCounter counter(limit);
  try {
    Json::sax_parse(text.data(), text.data() + text.size(), &counter);
  } catch (const Json::exception&) {
  }
  return counter.longest();
}

namespace json_detail {

inline void dump_python(const Json& j, int indent, int level, std::string& out) {
  const bool container = j.is_object() || j.is_array();
  if (!container || j.empty()) {
    out += container ? (j.is_object() ? "{}" : "[]") : dump_json(j);
    return;
  }
  // A new line indented to `depth` levels (nothing without indent).
  auto line = [&out, indent](int depth) {
    if (indent < 0) return;
    out.push_back('\n');
    out.append(size_t(indent) * size_t(depth), ' ');
  };
  out.push_back(j.is_object() ? '{' : '[');
  bool first = true;
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (!first) out.append(indent >= 0 ? "," : ", ");
    first = false;
    line(level + 1);
    if (j.is_object()) {
      out.append(dump_json(Json(it.key())));
      out.append(": ");
    }
    dump_python(it.value(), indent, level + 1, out);
  }
  line(level);
  out.push_back(j.is_object() ? '}' : ']');
}

}  // namespace json_detail

inline std::string dump_json_python(const Json& j, int indent) {
  std::string out;
  json_detail::dump_python(j, indent, 0, out);
  return out;
}

inline Result<Json> parse_json(std::string_view text, int max_depth) {
  json_detail::BoundedBuilder builder(max_depth);
  try {
    if (!Json::sax_parse(text.data(), text.data() + text.size(), &builder)) return make_error(builder.error());
  } catch (const Json::exception& e) {
    return make_error(std::string("JSON: ") + e.what());
  }
  return std::move(builder.root());
}

}  // namespace agentkv
