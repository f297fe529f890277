// A small, strict JSON reader and writer (RFC 8259). Parsing is bounded: nesting depth and input
// size are limited and every error names the offset and what was expected, so untrusted request
// bodies can be fed to it directly.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "util/status.h"

namespace agentkv {

class Json {
 public:
  enum class Type { kNull, kBool, kNumber, kString, kArray, kObject };

  Json() = default;
  static Json null() { return Json(); }
  static Json boolean(bool b);
  static Json number(double d);
  static Json string(std::string s);
  static Json array(std::vector<Json> items = {});
  static Json object();

  Type type() const { return type_; }
  bool is_null() const { return type_ == Type::kNull; }
  bool is_bool() const { return type_ == Type::kBool; }
  bool is_number() const { return type_ == Type::kNumber; }
  bool is_string() const { return type_ == Type::kString; }
  bool is_array() const { return type_ == Type::kArray; }
  bool is_object() const { return type_ == Type::kObject; }

  bool as_bool() const { return b_; }
  double as_number() const { return num_; }
  const std::string& as_string() const { return str_; }
  const std::vector<Json>& items() const { return arr_; }
  std::vector<Json>& items() { return arr_; }
  // Object members in insertion order.
  const std::vector<std::pair<std::string, Json>>& members() const { return obj_; }

  const Json* get(std::string_view key) const;  // nullptr when absent or not an object
  Json& set(std::string key, Json value);       // object: insert or replace
  void push(Json value) { arr_.push_back(std::move(value)); }

  std::string dump() const;

  static Result<Json> parse(std::string_view text, int max_depth = 64);

 private:
  friend class JsonParser;  // builds large objects without set()'s scan per member
  Type type_ = Type::kNull;
  bool b_ = false;
  double num_ = 0;
  std::string str_;
  std::vector<Json> arr_;
  std::vector<std::pair<std::string, Json>> obj_;
};

// Appends s as a quoted JSON string (escapes control characters; invalid UTF-8 bytes become U+FFFD).
void json_quote(std::string& out, std::string_view s);

}  // namespace agentkv
