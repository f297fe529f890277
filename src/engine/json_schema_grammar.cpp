// JSON Schema -> grammar rules (see json_schema_grammar.h): a recursive compiler over the schema,
// one rule per subschema, strings and patterns through engine/regex_grammar.
//
// Layout: the optional whitespace (json_space_rule) comes after '{', '[', ',' and ':' and before '}'
// and ']' - nowhere else (not before ',' or ':', not around the top-level value: the caller wraps
// it). An empty container is "{" ws "}" / "[" ws "]" (one ws, not two).
//
// Objects with `properties` generate only those, in the schema's order: the required ones always,
// the optional ones or not. The rules per position i are A_i (no member written yet) and B_i (one
// was: the next needs a ','), so commas are right however many optional members are left out.
// Without `properties`, any string keys with values of additionalProperties (any value when it is
// true or absent; only {} when false).
//
// $ref ("#", "#/$defs/Name", "#/definitions/Name") is one rule per pointer, declared before its body
// is compiled so recursion goes through the rule; a cycle that comes back to a pointer without
// entering an object or an array would be a left-recursive grammar and is refused.
#include "engine/json_schema_grammar.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <vector>

#include "engine/regex_grammar.h"

namespace agentkv {
namespace {

using Item = GrammarBuilder::Item;
using Seq = GrammarBuilder::Seq;

// Formats as patterns. A date is a real date (no 02-30, 02-29 only in leap years, no year 0000,
// which Python's datetime refuses); time is RFC 3339's full-time (an offset or Z is required).
constexpr std::string_view kDate =
    "(?:(?:[1-9][0-9]{3}|0[1-9][0-9]{2}|00[1-9][0-9]|000[1-9])-(?:(?:0[13578]|1[02])-(?:0[1-9]|[12][0-9]|3[01])"
    "|(?:0[469]|11)-(?:0[1-9]|[12][0-9]|30)|02-(?:0[1-9]|1[0-9]|2[0-8]))"
    "|(?:[0-9]{2}(?:0[48]|[2468][048]|[13579][26])|(?:0[48]|[2468][048]|[13579][26])00)-02-29)";
constexpr std::string_view kTime =
    "(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](?:\\.[0-9]{1,9})?(?:Z|[+-](?:[01][0-9]|2[0-3]):[0-5][0-9])";
constexpr std::string_view kUuid =
    "[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}";

bool is_annotation(std::string_view k) {
  static constexpr std::string_view kAnnotations[] = {"title",  "description", "default",  "examples",
                                                      "$schema", "$id",        "$comment", "deprecated",
                                                      "readOnly", "writeOnly"};
  return std::find(std::begin(kAnnotations), std::end(kAnnotations), k) != std::end(kAnnotations);
}

bool is_compiled_keyword(std::string_view k) {
  static constexpr std::string_view kKeywords[] = {
      "type",     "properties", "required",  "additionalProperties", "enum",   "const",      "items",
      "minItems", "maxItems",   "anyOf",     "allOf",                "$defs",  "definitions", "$ref",
      "minLength", "maxLength", "format",    "pattern",              "uniqueItems"};
  return std::find(std::begin(kKeywords), std::end(kKeywords), k) != std::end(kKeywords);
}

// The JSON building blocks, made once per grammar on first use.
class JsonRules {
 public:
  explicit JsonRules(GrammarBuilder& b) : b_(b), chars_(b) {}

  JsonStringChars& chars() { return chars_; }

  uint32_t ws() {
    if (!ws_) {
      const uint32_t indent = b_.repeat(GrammarBuilder::bytes(ByteSet().set(' ').set('\t')), 0, 20);
      ws_ = b_.rule("ws", {Seq{}, Seq{GrammarBuilder::byte(' ')}, Seq{GrammarBuilder::byte('\n'), GrammarBuilder::ref(indent)}});
    }
    return *ws_;
  }
  Item ws_item() { return GrammarBuilder::ref(ws()); }

  // '"' body '"'.
  uint32_t quoted(const Item& body) {
    return b_.rule("string", {Seq{GrammarBuilder::byte('"'), body, GrammarBuilder::byte('"')}});
  }
  uint32_t string() {
    if (!string_) string_ = quoted(chars_.any_star());
    return *string_;
  }
  uint32_t integer() {
    if (!integer_) {
      const Item minus = GrammarBuilder::ref(b_.optional(GrammarBuilder::byte('-')));
      const Item digits = GrammarBuilder::ref(b_.repeat(GrammarBuilder::range('0', '9'), 0, 15));
      integer_ = b_.rule("integer", {Seq{minus, GrammarBuilder::byte('0')}, Seq{minus, GrammarBuilder::range('1', '9'), digits}});
    }
    return *integer_;
  }
  uint32_t number() {
    if (!number_) {
      const Item digit = GrammarBuilder::range('0', '9');
      const uint32_t frac = b_.rule("fraction", {Seq{GrammarBuilder::byte('.'), GrammarBuilder::ref(b_.repeat(digit, 1, 16))}});
      // Exponents up to 99 (1-2 digits, or 3 with a leading zero as in "3e-007"): every number the
      // grammar admits is then a finite double (16 integer digits x 10^99 < 1.8e308), so the server's own
      // JSON parser (and any client's) reads what it generated. Any 3 digits let 9999999999999999E999
      // through, which overflows (found by json_schema_fuzz).
      const uint32_t exp_digits = b_.rule(
          "exponent digits", {Seq{GrammarBuilder::ref(b_.repeat(digit, 1, 2))}, Seq{GrammarBuilder::byte('0'), digit, digit}});
      const uint32_t exp = b_.rule(
          "exponent", {Seq{GrammarBuilder::bytes(ByteSet().set('e').set('E')),
                           GrammarBuilder::ref(b_.optional(GrammarBuilder::bytes(ByteSet().set('+').set('-')))),
                           GrammarBuilder::ref(exp_digits)}});
      number_ = b_.rule("number", {Seq{GrammarBuilder::ref(integer()), GrammarBuilder::ref(b_.optional(GrammarBuilder::ref(frac))),
                                       GrammarBuilder::ref(b_.optional(GrammarBuilder::ref(exp)))}});
    }
    return *number_;
  }
  uint32_t boolean() {
    if (!boolean_) boolean_ = b_.rule("boolean", {literal_seq("true"), literal_seq("false")});
    return *boolean_;
  }
  uint32_t null() {
    if (!null_) null_ = b_.literal("null");
    return *null_;
  }

  uint32_t any_value() {
    if (!any_value_) {
      const uint32_t v = b_.declare("value");
      any_value_ = v;
      any_object_ = object_of(v);
      b_.add_alternative(v, {GrammarBuilder::ref(*any_object_)});
      b_.add_alternative(v, {GrammarBuilder::ref(array_of(v, 0, -1))});
      for (const uint32_t r : {string(), number(), boolean(), null()}) b_.add_alternative(v, {GrammarBuilder::ref(r)});
    }
    return *any_value_;
  }
  uint32_t any_object() {
    any_value();
    return *any_object_;
  }

  // An object of any string keys, each value `value`.
  uint32_t object_of(uint32_t value) {
    const uint32_t member = b_.rule("member", {Seq{GrammarBuilder::ref(string()), GrammarBuilder::byte(':'), ws_item(), GrammarBuilder::ref(value)}});
    const uint32_t more = b_.star(GrammarBuilder::ref(b_.rule("next-member", {Seq{GrammarBuilder::byte(','), ws_item(), GrammarBuilder::ref(member)}})));
    return b_.rule("object", {empty_container('{', '}'), Seq{GrammarBuilder::byte('{'), ws_item(), GrammarBuilder::ref(member),
                                                              GrammarBuilder::ref(more), ws_item(), GrammarBuilder::byte('}')}});
  }
  uint32_t empty_object() { return b_.rule("object", {empty_container('{', '}')}); }

  // An array of min..max items (max < 0: unbounded).
  uint32_t array_of(uint32_t item, int min, int max) {
    std::vector<Seq> alts;
    if (min == 0) alts.push_back(empty_container('[', ']'));
    if (max != 0) {
      const Item next = GrammarBuilder::ref(b_.rule("next-item", {Seq{GrammarBuilder::byte(','), ws_item(), GrammarBuilder::ref(item)}}));
      const int more_min = std::max(min - 1, 0), more_max = max < 0 ? -1 : max - 1;
      const uint32_t more = more_max < 0 && more_min == 0 ? b_.star(next) : b_.repeat(next, more_min, more_max);
      alts.push_back(Seq{GrammarBuilder::byte('['), ws_item(), GrammarBuilder::ref(item), GrammarBuilder::ref(more), ws_item(),
                         GrammarBuilder::byte(']')});
    }
    return b_.rule("array", std::move(alts));
  }

  Seq empty_container(char open, char close) {
    return Seq{GrammarBuilder::byte(uint8_t(open)), ws_item(), GrammarBuilder::byte(uint8_t(close))};
  }
  static Seq literal_seq(std::string_view text) {
    Seq s;
    GrammarBuilder::append_literal(s, text);
    return s;
  }

 private:
  GrammarBuilder& b_;
  JsonStringChars chars_;
  std::optional<uint32_t> ws_, string_, integer_, number_, boolean_, null_, any_value_, any_object_;
};

class SchemaCompiler {
 public:
  SchemaCompiler(GrammarBuilder& b, const Json& root, const std::string& where, const JsonSchemaLimits& limits)
      : b_(b), root_(root), where_(where), limits_(limits), r_(b), rules_at_start_(b.n_rules()) {}

  Result<uint32_t> compile_root() { return compile_ref("#", where_); }

 private:
  struct RefRule {
    uint32_t rule;
    bool done;
    int containers;  // containers_ when its body started
  };

  static Error refuse(const std::string& path, const std::string& what) { return make_error(path + ": " + what); }
  static Error unsupported(const std::string& path, const std::string& keyword) {
    return refuse(path, "'" + keyword + "' is not supported");
  }

  Result<uint32_t> compile(const Json& s, const std::string& path) {
    if (depth_ >= limits_.max_depth)
      return refuse(path, "subschemas nested deeper than max_depth (" + std::to_string(limits_.max_depth) + ")");
    ++depth_;
    auto r = compile_schema(s, path);
    --depth_;
    if (r.ok() && b_.n_rules() - rules_at_start_ > size_t(limits_.max_rules))
      return refuse(where_, "the schema needs more than max_rules (" + std::to_string(limits_.max_rules) + ") grammar rules");
    return r;
  }

  // Compiles a subschema that sits inside an object or array (so a $ref cycle through it consumes).
  Result<uint32_t> compile_nested(const Json& s, const std::string& path) {
    ++containers_;
    auto r = compile(s, path);
    --containers_;
    return r;
  }

  Result<uint32_t> compile_schema(const Json& s, const std::string& path) {
    if (s.is_boolean()) {
      if (s.get<bool>()) return r_.any_value();
      return refuse(path, "the schema false can never be satisfied");
    }
    if (!s.is_object()) return refuse(path, "a schema must be an object or a boolean");
    for (const auto& [k, v] : s.items()) {
      if (is_annotation(k)) continue;
      if (!is_compiled_keyword(k)) return unsupported(path, k);
      if (k == "uniqueItems" && !(v.is_boolean() && !v.get<bool>())) return unsupported(path, k);
    }
    if (const Json* ref = json_member(s, "$ref")) {
      AGENTKV_TRY(only_annotations_beside(s, "$ref", path));
      if (!ref->is_string()) return refuse(path + ".$ref", "must be a string");
      return compile_ref(ref->get<std::string>(), path);
    }
    if (const Json* all = json_member(s, "allOf")) {
      AGENTKV_TRY(only_annotations_beside(s, "allOf", path));
      if (!all->is_array() || all->size() != 1) return refuse(path, "'allOf' with other than one subschema is not supported");
      return compile(all->at(0), path + ".allOf[0]");
    }
    if (const Json* any = json_member(s, "anyOf")) {
      AGENTKV_TRY(only_annotations_beside(s, "anyOf", path));
      if (!any->is_array() || any->empty()) return refuse(path + ".anyOf", "must be a non-empty array of schemas");
      std::vector<Seq> alts;
      for (size_t i = 0; i < any->size(); ++i) {
        uint32_t alt = 0;
        AGENTKV_ASSIGN_OR_RETURN(alt, compile(any->at(i), path + ".anyOf[" + std::to_string(i) + "]"));
        alts.push_back({GrammarBuilder::ref(alt)});
      }
      return b_.rule("any-of", std::move(alts));
    }
    std::vector<std::string> types;
    AGENTKV_ASSIGN_OR_RETURN(types, read_types(s, path));
    if (json_member(s, "enum") || json_member(s, "const")) return compile_enum(s, types, path);
    if (types.empty()) return r_.any_value();
    std::vector<Seq> alts;
    for (const std::string& t : types) {
      uint32_t rule = 0;
      AGENTKV_ASSIGN_OR_RETURN(rule, compile_type(s, t, path));
      alts.push_back({GrammarBuilder::ref(rule)});
    }
    if (alts.size() == 1) return alts[0][0].rule;
    return b_.rule("types", std::move(alts));
  }

  // A keyword that stands for the whole schema ($ref, allOf, anyOf) takes only annotations beside it
  // (and $defs, which only holds definitions).
  static Result<bool> only_annotations_beside(const Json& s, const std::string& keyword, const std::string& path) {
    for (const auto& [k, v] : s.items())
      if (k != keyword && !is_annotation(k) && k != "$defs" && k != "definitions")
        return refuse(path, "'" + k + "' beside '" + keyword + "' is not supported");
    return true;
  }

  // The types `type` names, or those its keywords imply when it is absent (none: any value).
  static Result<std::vector<std::string>> read_types(const Json& s, const std::string& path) {
    static constexpr std::string_view kTypes[] = {"object", "array", "string", "number", "integer", "boolean", "null"};
    std::vector<std::string> types;
    if (const Json* t = json_member(s, "type")) {
      const Json list = t->is_array() ? *t : Json::array({*t});
      for (const Json& one : list) {
        if (!one.is_string() || std::find(std::begin(kTypes), std::end(kTypes), one.get<std::string>()) == std::end(kTypes))
          return refuse(path + ".type", dump_json(one).append(" is not a JSON Schema type"));
        if (std::find(types.begin(), types.end(), one.get<std::string>()) == types.end()) types.push_back(one.get<std::string>());
      }
      if (types.empty()) return refuse(path + ".type", "an empty list of types can never be satisfied");
      return types;
    }
    auto has_any = [&](std::initializer_list<const char*> keys) {
      return std::any_of(keys.begin(), keys.end(), [&](const char* k) { return json_member(s, k) != nullptr; });
    };
    if (has_any({"properties", "required", "additionalProperties"})) types.push_back("object");
    if (has_any({"items", "minItems", "maxItems"})) types.push_back("array");
    if (has_any({"minLength", "maxLength", "pattern", "format"})) types.push_back("string");
    return types;
  }

  Result<uint32_t> compile_type(const Json& s, const std::string& type, const std::string& path) {
    if (type == "object") return compile_object(s, path);
    if (type == "array") return compile_array(s, path);
    if (type == "string") return compile_string(s, path);
    if (type == "number") return r_.number();
    if (type == "integer") return r_.integer();
    if (type == "boolean") return r_.boolean();
    return r_.null();
  }

  static bool has_type(const Json& v, const std::string& type) {
    if (type == "object") return v.is_object();
    if (type == "array") return v.is_array();
    if (type == "string") return v.is_string();
    if (type == "number") return v.is_number();
    if (type == "integer") {
      return v.is_number_integer() || (v.is_number_float() && std::isfinite(v.get<double>()) &&
                                       std::floor(v.get<double>()) == v.get<double>());
    }
    if (type == "boolean") return v.is_boolean();
    return v.is_null();
  }

  // enum / const: the literals (compact JSON text) of the values that also have a sibling type.
  Result<uint32_t> compile_enum(const Json& s, const std::vector<std::string>& types, const std::string& path) {
    for (const auto& [k, v] : s.items())
      if (k != "enum" && k != "const" && k != "type" && !is_annotation(k) && k != "$defs" && k != "definitions")
        return refuse(path, "'" + k + "' beside 'enum' or 'const' is not supported");
    std::vector<Json> values;
    if (const Json* e = json_member(s, "enum")) {
      if (!e->is_array()) return refuse(path + ".enum", "must be an array");
      values.assign(e->begin(), e->end());
    }
    if (const Json* c = json_member(s, "const")) {
      if (json_member(s, "enum") && std::find(values.begin(), values.end(), *c) == values.end()) values.clear();
      else values = {*c};
    }
    std::vector<Seq> alts;
    for (const Json& v : values) {
      if (!types.empty() && std::none_of(types.begin(), types.end(), [&](const std::string& t) { return has_type(v, t); }))
        continue;
      alts.push_back(JsonRules::literal_seq(dump_json(v)));
    }
    if (alts.empty()) return refuse(path, "'enum' / 'const' can never be satisfied (no value has the schema's type)");
    return b_.rule("enum", std::move(alts));
  }

  // A non-negative integer keyword up to max_repeat; nullopt when absent.
  Result<std::optional<int>> read_count(const Json& s, const char* key, const std::string& path) {
    const Json* v = json_member(s, key);
    if (!v) return std::optional<int>();
    double d = -1;
    if (v->is_number()) d = v->get<double>();
    if (!(d >= 0) || std::floor(d) != d) return refuse(path + "." + key, "must be a non-negative integer");
    if (d > limits_.max_repeat)
      return refuse(path + "." + key, std::to_string(int64_t(d)) + " is over max_repeat (" + std::to_string(limits_.max_repeat) + ")");
    return std::optional<int>(int(d));
  }

  Result<uint32_t> compile_array(const Json& s, const std::string& path) {
    std::optional<int> min, max;
    AGENTKV_ASSIGN_OR_RETURN(min, read_count(s, "minItems", path));
    AGENTKV_ASSIGN_OR_RETURN(max, read_count(s, "maxItems", path));
    const int lo = min.value_or(0), hi = max.value_or(-1);
    if (hi >= 0 && hi < lo) return refuse(path, "'minItems' over 'maxItems' can never be satisfied");
    const Json* items = json_member(s, "items");
    if (items && items->is_boolean() && !items->get<bool>()) {
      if (lo > 0) return refuse(path, "'items' false with 'minItems' over 0 can never be satisfied");
      return r_.array_of(0, 0, 0);
    }
    if (items && items->is_array()) return refuse(path + ".items", "an array of schemas ('prefixItems' style) is not supported");
    uint32_t item = 0;
    if (items) {
      AGENTKV_ASSIGN_OR_RETURN(item, compile_nested(*items, path + ".items"));
    } else {
      item = r_.any_value();
    }
    return r_.array_of(item, lo, hi);
  }

  Result<uint32_t> compile_object(const Json& s, const std::string& path) {
    const Json* props = json_member(s, "properties");
    const Json* required = json_member(s, "required");
    std::vector<std::string> req;
    if (required) {
      if (!required->is_array()) return refuse(path + ".required", "must be an array of strings");
      for (const Json& n : *required) {
        if (!n.is_string()) return refuse(path + ".required", "must be an array of strings");
        req.push_back(n.get<std::string>());
      }
    }
    const Json* extra = json_member(s, "additionalProperties");
    if (extra && !extra->is_boolean() && !extra->is_object())
      return refuse(path + ".additionalProperties", "must be a boolean or a schema");
    if (!props) {
      if (!req.empty()) return refuse(path, "'required' without 'properties' is not supported");
      if (!extra || (extra->is_boolean() && extra->get<bool>())) return r_.any_object();
      if (extra->is_boolean()) return r_.empty_object();
      uint32_t value = 0;
      AGENTKV_ASSIGN_OR_RETURN(value, compile_nested(*extra, path + ".additionalProperties"));
      return r_.object_of(value);
    }
    if (!props->is_object()) return refuse(path + ".properties", "must be an object of schemas");
    for (const std::string& n : req)
      if (!props->contains(n)) return refuse(path + ".required", "'" + n + "' is not in 'properties'");

    // The members, in schema order, then the A_i / B_i chains from the last one back.
    struct Member {
      uint32_t rule;
      bool required;
    };
    std::vector<Member> members;
    for (const auto& [name, schema] : props->items()) {
      uint32_t value = 0;
      AGENTKV_ASSIGN_OR_RETURN(value, compile_nested(schema, path + ".properties." + name));
      Seq seq = JsonRules::literal_seq(dump_json(Json(name)));
      seq.push_back(GrammarBuilder::byte(':'));
      seq.push_back(r_.ws_item());
      seq.push_back(GrammarBuilder::ref(value));
      members.push_back({b_.rule("property", {std::move(seq)}),
                         std::find(req.begin(), req.end(), name) != req.end()});
    }
    std::optional<uint32_t> first, next;  // A_{i+1}, B_{i+1}; nullopt: nothing is left (ε)
    auto tail = [](Seq seq, const std::optional<uint32_t>& rest) {
      if (rest) seq.push_back(GrammarBuilder::ref(*rest));
      return seq;
    };
    for (size_t i = members.size(); i-- > 0;) {
      const Item m = GrammarBuilder::ref(members[i].rule);
      std::vector<Seq> a = {tail({r_.ws_item(), m}, next)};
      std::vector<Seq> b = {tail({GrammarBuilder::byte(','), r_.ws_item(), m}, next)};
      if (!members[i].required) {
        a.push_back(tail({}, first));
        b.push_back(tail({}, next));
      }
      first = b_.rule("members", std::move(a));
      next = b_.rule("more-members", std::move(b));
    }
    // "{" A_0 ws "}": A_0 writes the ws after '{' before its first member; when it writes none the
    // one ws is the empty object's.
    Seq object = tail({GrammarBuilder::byte('{')}, first);
    object.push_back(r_.ws_item());
    object.push_back(GrammarBuilder::byte('}'));
    return b_.rule("object", {std::move(object)});
  }

  Result<uint32_t> compile_string(const Json& s, const std::string& path) {
    const Json* format = json_member(s, "format");
    const Json* pattern = json_member(s, "pattern");
    std::optional<int> min, max;
    AGENTKV_ASSIGN_OR_RETURN(min, read_count(s, "minLength", path));
    AGENTKV_ASSIGN_OR_RETURN(max, read_count(s, "maxLength", path));
    if (format && pattern) return refuse(path, "'format' with 'pattern' is not supported");
    if ((format || pattern) && (min || max))
      return refuse(path, std::string("'") + (min ? "minLength" : "maxLength") + "' with '" + (format ? "format" : "pattern") +
                              "' is not supported");
    std::string regex;
    if (format) {
      const std::string f = format->is_string() ? format->get<std::string>() : dump_json(*format);
      if (f == "date") regex = "^" + std::string(kDate) + "$";
      else if (f == "time") regex = "^" + std::string(kTime) + "$";
      else if (f == "date-time") regex = "^" + std::string(kDate) + "T" + std::string(kTime) + "$";
      else if (f == "uuid") regex = "^" + std::string(kUuid) + "$";
      else return refuse(path, "'format' \"" + f + "\" is not supported");
    } else if (pattern) {
      if (!pattern->is_string()) return refuse(path + ".pattern", "must be a string");
      regex = pattern->get<std::string>();
    }
    if (!regex.empty()) {
      auto body = compile_pattern(b_, r_.chars(), regex, limits_.max_repeat, limits_.max_depth);
      if (!body.ok()) return refuse(path, std::string("'") + (format ? "format" : "pattern") + "': " + body.error());
      return r_.quoted(GrammarBuilder::ref(*body));
    }
    if (!min && !max) return r_.string();
    const int lo = min.value_or(0), hi = max.value_or(-1);
    if (hi >= 0 && hi < lo) return refuse(path, "'minLength' over 'maxLength' can never be satisfied");
    return r_.quoted(GrammarBuilder::ref(b_.repeat(r_.chars().any(), lo, hi)));
  }

  // One rule per pointer, declared before its body so that recursion goes through it.
  Result<uint32_t> compile_ref(const std::string& pointer, const std::string& path) {
    if (const auto it = refs_.find(pointer); it != refs_.end()) {
      if (!it->second.done && it->second.containers == containers_)
        return refuse(path, "'$ref' \"" + pointer + "\" refers back to itself without an object or array between");
      return it->second.rule;
    }
    const Json* target = &root_;
    std::string target_path = where_;
    if (pointer != "#") {
      std::string name;
      const char* section = nullptr;
      for (const char* s : {"$defs", "definitions"}) {
        const std::string prefix = std::string("#/") + s + "/";
        if (pointer.rfind(prefix, 0) == 0) {
          section = s;
          name = pointer.substr(prefix.size());
        }
      }
      if (!section || name.empty() || name.find('/') != std::string::npos)
        return refuse(path, "'$ref' \"" + pointer + "\" is not supported (only \"#\", \"#/$defs/Name\", \"#/definitions/Name\")");
      std::string decoded;  // JSON Pointer escapes: ~1 is '/', ~0 is '~'
      for (size_t i = 0; i < name.size(); ++i) {
        if (name[i] == '~' && i + 1 < name.size() && (name[i + 1] == '0' || name[i + 1] == '1')) {
          decoded += name[++i] == '0' ? '~' : '/';
        } else {
          decoded += name[i];
        }
      }
      const Json* defs = json_member(root_, section);
      target = defs ? json_member(*defs, decoded) : nullptr;
      if (!target) return refuse(path, "'$ref' \"" + pointer + "\" is not defined");
      target_path = where_ + "." + section + "." + decoded;
    }
    const uint32_t rule = b_.declare("ref " + pointer);
    refs_.emplace(pointer, RefRule{rule, false, containers_});
    uint32_t body = 0;
    AGENTKV_ASSIGN_OR_RETURN(body, compile(*target, target_path));
    b_.add_alternative(rule, {GrammarBuilder::ref(body)});
    refs_.at(pointer).done = true;
    return rule;
  }

  GrammarBuilder& b_;
  const Json& root_;
  std::string where_;
  JsonSchemaLimits limits_;
  JsonRules r_;
  size_t rules_at_start_;
  std::map<std::string, RefRule> refs_;
  int depth_ = 0, containers_ = 0;
};

}  // namespace

Result<uint32_t> compile_json_schema(GrammarBuilder& b, const Json& schema, const std::string& where,
                                     const JsonSchemaLimits& limits) {
  return SchemaCompiler(b, schema, where, limits).compile_root();
}

uint32_t json_any_value_rule(GrammarBuilder& b) { return JsonRules(b).any_value(); }
uint32_t json_any_object_rule(GrammarBuilder& b) { return JsonRules(b).any_object(); }
uint32_t json_space_rule(GrammarBuilder& b) { return JsonRules(b).ws(); }

}  // namespace agentkv
