// The JSON Schema compiler (engine/json_schema_grammar.h, engine/regex_grammar.h) checked through the
// matcher at the byte level: documents that validate are accepted completely, documents that do not
// are refused (at some byte, or not complete at the end), and unsupported keywords are refused with
// an error naming the keyword and its path.
#include "engine/json_schema_grammar.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "engine/grammar_matcher.h"

namespace agentkv {
namespace {

std::shared_ptr<const Grammar> compile(std::string_view schema, const JsonSchemaLimits& limits = {}) {
  auto j = parse_json(schema);
  EXPECT_TRUE(j.ok()) << j.error();
  if (!j.ok()) return nullptr;
  GrammarBuilder b;
  auto root = compile_json_schema(b, *j, "schema", limits);
  EXPECT_TRUE(root.ok()) << root.error();
  if (!root.ok()) return nullptr;
  auto g = b.build(*root);
  EXPECT_TRUE(g.ok()) << g.error();
  return g.ok() ? *g : nullptr;
}

// The whole text is a sentence of the grammar (and, as a check of the test itself, valid JSON).
bool accepts(const std::shared_ptr<const Grammar>& g, std::string_view text) {
  if (!g) return false;
  GrammarMatcher m(g, nullptr);
  if (!m.accepts_bytes(text)) return false;
  if (!m.advance_bytes(text) || !m.complete()) return false;
  EXPECT_TRUE(parse_json(text).ok()) << "the grammar accepted invalid JSON: " << text;
  return true;
}

void expect_accepts(std::string_view schema, const std::vector<std::string>& valid,
                    const std::vector<std::string>& invalid) {
  const auto g = compile(schema);
  ASSERT_TRUE(g) << schema;
  for (const std::string& v : valid) EXPECT_TRUE(accepts(g, v)) << schema << " should accept " << v;
  for (const std::string& v : invalid) EXPECT_FALSE(accepts(g, v)) << schema << " should refuse " << v;
}

// The error of a schema the compiler refuses ("" if it compiles).
std::string refusal(std::string_view schema, const JsonSchemaLimits& limits = {}) {
  auto j = parse_json(schema);
  EXPECT_TRUE(j.ok()) << j.error();
  GrammarBuilder b;
  auto root = compile_json_schema(b, *j, "schema", limits);
  if (root.ok()) return "";
  EXPECT_EQ(root.code(), ErrorCode::kInvalidArgument);
  return root.error();
}

TEST(JsonSchemaGrammar, Numbers) {
  expect_accepts(R"({"type":"integer"})", {"0", "-0", "7", "-12", "1234567890123456"},
                 {"01", "1.5", "1e3", "12345678901234567", "-", "+1", "", " 1", "1 "});
  expect_accepts(R"({"type":"number"})", {"0", "1.5", "-0.25e+10", "1E3", "3e-007", "0.0000000000000001"},
                 {"1.", ".5", "1e", "1.2.3", "01.5", "1e1234", "9999999999999999E999", "1e100", "0.00000000000000001", "NaN"});
}

TEST(JsonSchemaGrammar, BooleanNullAndTypeLists) {
  expect_accepts(R"({"type":"boolean"})", {"true", "false"}, {"null", "True", "1", "\"true\""});
  expect_accepts(R"({"type":"null"})", {"null"}, {"nul", "false"});
  expect_accepts(R"({"type":["string","null"],"maxLength":2})", {"null", "\"ab\"", "\"\""}, {"\"abc\"", "1"});
}

TEST(JsonSchemaGrammar, StringsEscapesAndUtf8) {
  expect_accepts(R"({"type":"string"})",
                 {R"("")", R"("a\"b\\c\/d\b\f\n\r\t")", R"("\u00e9\u00E9\uD83D\uDE00")", "\"\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80\"",
                  "\"\x7F\"", "\"\xED\x9F\xBF\xEF\xBF\xBF\xF4\x8F\xBF\xBF\""},
                 {R"("\x")", R"("\u12")", R"("\uD800")", R"("\uDC00")", R"("\uD83Dx")", "\"a\nb\"", "\"\t\"",
                  "\"\x01\"", "\"\xC0\xAF\"", "\"\xC1\xBF\"", "\"\xE0\x80\xAF\"", "\"\xED\xA0\x80\"", "\"\xF0\x80\x80\x80\"",
                  "\"\xF4\x90\x80\x80\"", "\"\xF5\x80\x80\x80\"", "\"\xC3\"", "\"\x80\"", R"("abc)", "abc"});
}

TEST(JsonSchemaGrammar, StringLengthCountsCharacters) {
  // An escape and a multi-byte character are one character each.
  expect_accepts(R"({"type":"string","minLength":2,"maxLength":3})",
                 {R"("ab")", R"("\n\u00e9")", "\"\xC3\xA9\xC3\xA9\xC3\xA9\"", R"("a\"b")"},
                 {R"("a")", R"("abcd")", "\"\xC3\xA9\"", R"("")"});
}

TEST(JsonSchemaGrammar, Whitespace) {
  // After '{' '[' ',' ':' and before '}' ']'; nowhere else; bounded.
  expect_accepts(
      R"({"type":"object","properties":{"a":{"type":"array","items":{"type":"integer"}},"b":{"type":"integer"}},"required":["a","b"]})",
      {R"({"a":[1,2],"b":3})", R"({ "a": [ 1, 2 ], "b": 3 })", "{\n  \"a\": [\n    1,\n\t2\n  ],\n  \"b\": 3\n}"},
      {R"({"a" :[1],"b":3})", R"({"a":[1] ,"b":3})", R"( {"a":[1],"b":3})", R"({"a":[1],"b":3} )", R"({  "a":[1],"b":3})",
       "{\n" + std::string(21, ' ') + "\"a\":[1],\"b\":3}"});
  expect_accepts(R"({"type":"array"})", {"[]", "[ ]", "[\n]"}, {"[  ]", "[\n\n]"});
}

TEST(JsonSchemaGrammar, DeclaredPropertiesInOrderWithCommasRight) {
  const char* schema = R"({"type":"object","properties":{
      "a":{"type":"integer"},"b":{"type":"string"},"c":{"type":"integer"},"d":{"type":"boolean"}},
      "required":["a","c"],"additionalProperties":false})";
  expect_accepts(schema,
                 {R"({"a":1,"c":2})", R"({"a":1,"b":"x","c":2})", R"({"a":1,"c":2,"d":true})",
                  R"({"a":1,"b":"x","c":2,"d":false})"},
                 {R"({"c":2,"a":1})", R"({"a":1})", R"({"c":2})", R"({"a":1,"c":2,"e":1})", R"({"a":1,,"c":2})",
                  R"({,"a":1,"c":2})", R"({"a":1,"c":2,})", R"({"a":"1","c":2})", R"({"a":1,"b":"x","b":"y","c":2})", "{}"});
  // All optional: any subset in order, including none.
  expect_accepts(R"({"type":"object","properties":{"x":{"type":"integer"},"y":{"type":"integer"},"z":{"type":"integer"}}})",
                 {"{}", "{ }", R"({"x":1})", R"({"y":1})", R"({"z":1})", R"({"x":1,"z":3})", R"({"x":1,"y":2,"z":3})"},
                 {"{,}", R"({"x":1,})", R"({,"y":1})", R"({"y":1,"x":1})", R"({"w":1})"});
  // additionalProperties given as a schema beside properties: still only the declared ones.
  expect_accepts(R"({"type":"object","properties":{"x":{"type":"integer"}},"additionalProperties":{"type":"string"}})",
                 {"{}", R"({"x":1})"}, {R"({"y":"s"})"});
  // Keys that need escaping are written as their JSON text.
  expect_accepts(R"({"type":"object","properties":{"a\"b":{"type":"null"}},"required":["a\"b"]})", {R"({"a\"b":null})"},
                 {R"({"a"b":null})"});
}

TEST(JsonSchemaGrammar, ObjectsWithoutProperties) {
  expect_accepts(R"({"type":"object","additionalProperties":{"type":"integer"}})",
                 {"{}", R"({"x":1})", R"({"x":1,"y":-2})", R"({"":0})"}, {R"({"x":"s"})", R"({"x":1,})", "[]"});
  expect_accepts(R"({"type":"object","additionalProperties":false})", {"{}", "{ }"}, {R"({"x":1})"});
  expect_accepts(R"({"type":"object"})", {"{}", R"({"x":[1,{"y":null}],"z":"s"})"}, {"[]", "1", R"({"x"})"});
  expect_accepts(R"({"type":"object","additionalProperties":true})", {R"({"k":true})"}, {"null"});
}

TEST(JsonSchemaGrammar, ArraysItemsAndBounds) {
  expect_accepts(R"({"type":"array","items":{"type":"integer"},"minItems":1,"maxItems":3})",
                 {"[1]", "[1,2]", "[1, 2, 3]"}, {"[]", "[1,2,3,4]", "[1,]", "[,1]", "[\"a\"]", "[1 2]"});
  expect_accepts(R"({"type":"array","items":{"type":"string"},"minItems":2})", {R"(["a","b"])", R"(["a","b","c","d"])"},
                 {R"(["a"])"});
  expect_accepts(R"({"type":"array","maxItems":0})", {"[]"}, {"[1]"});
  expect_accepts(R"({"type":"array","items":false})", {"[]"}, {"[1]"});
  expect_accepts(R"({"type":"array","uniqueItems":false})", {"[1,1]", R"([{"a":[]},"x"])"}, {"{}"});
}

TEST(JsonSchemaGrammar, EnumAndConst) {
  expect_accepts(R"({"enum":["a",1,null,{"k":[1,2]},"é"]})", {R"("a")", "1", "null", R"({"k":[1,2]})", "\"\xC3\xA9\""},
                 {R"("b")", "2", R"({"k":[1, 2]})", R"("A")"});
  // A sibling type keeps only the values of that type.
  expect_accepts(R"({"type":"string","enum":["a",1]})", {R"("a")"}, {"1"});
  expect_accepts(R"({"type":"integer","enum":[1,2.0,2.5]})", {"1", "2.0"}, {"2.5"});
  expect_accepts(R"({"const":"fixed","type":"string"})", {R"("fixed")"}, {R"("other")"});
  expect_accepts(R"({"enum":["a","b"],"const":"b"})", {R"("b")"}, {R"("a")"});
  EXPECT_NE(refusal(R"({"type":"string","enum":[1,2]})").find("can never be satisfied"), std::string::npos);
}

TEST(JsonSchemaGrammar, AnyOfAllOfAndNoType) {
  expect_accepts(R"({"anyOf":[{"type":"integer"},{"type":"array","items":{"type":"boolean"}}]})", {"3", "[true]"},
                 {R"("3")", "[1]"});
  expect_accepts(R"({"allOf":[{"type":"integer"}],"description":"inlined"})", {"3"}, {"true"});
  expect_accepts("{}", {"1", R"({"a":[null]})", R"("s")"}, {"", "tru"});
  expect_accepts("true", {"1", "[]"}, {"x"});
  // No type: the type its keywords imply.
  expect_accepts(R"({"properties":{"a":{"type":"integer"}},"required":["a"]})", {R"({"a":1})"}, {R"({"a":"x"})", "1"});
}

TEST(JsonSchemaGrammar, RefsAndRecursion) {
  // A tree through "#", and a linked list through $defs.
  expect_accepts(R"({"type":"object","properties":{"v":{"type":"integer"},"kids":{"type":"array","items":{"$ref":"#"}}},"required":["v"]})",
                 {R"({"v":1})", R"({"v":1,"kids":[{"v":2},{"v":3,"kids":[{"v":4}]}]})"},
                 {R"({"v":1,"kids":[{}]})", R"({"v":1,"kids":[1]})"});
  expect_accepts(R"({"$ref":"#/$defs/Node","$defs":{"Node":{"type":"object","properties":{
                      "next":{"anyOf":[{"$ref":"#/$defs/Node"},{"type":"null"}]}},"required":["next"]}}})",
                 {R"({"next":null})", R"({"next":{"next":{"next":null}}})"}, {R"({"next":{}})", "{}"});
  expect_accepts(R"({"definitions":{"A~1B":{"type":"integer"}},"type":"array","items":{"$ref":"#/definitions/A~01B"}})",
                 {"[1]", "[]"}, {R"(["a"])"});
  // A cycle that never enters an object or array would be a left-recursive grammar.
  EXPECT_NE(refusal(R"({"anyOf":[{"$ref":"#"},{"type":"null"}]})").find("refers back to itself"), std::string::npos);
  EXPECT_NE(refusal(R"({"$defs":{"A":{"$ref":"#/$defs/B"},"B":{"$ref":"#/$defs/A"}},"$ref":"#/$defs/A"})").find("refers back"),
            std::string::npos);
  EXPECT_EQ(refusal(R"({"$ref":"#/$defs/Missing"})"), "schema: '$ref' \"#/$defs/Missing\" is not defined");
  EXPECT_NE(refusal(R"({"$ref":"other.json#/x"})").find("'$ref' \"other.json#/x\" is not supported"), std::string::npos);
  EXPECT_NE(refusal(R"({"$defs":{"A":{"type":"object"}},"$ref":"#/$defs/A/properties/x"})").find("is not supported"),
            std::string::npos);
}

// A pydantic v2 model_json_schema() (after the openai client's to_strict_json_schema): $defs, $ref,
// an enum, a nested object, an array of objects, Optional as anyOf with null, titles everywhere.
constexpr const char* kPydanticSchema = R"({
  "$defs": {
    "Address": {
      "properties": {"street": {"title": "Street", "type": "string"},
                     "zip": {"title": "Zip", "type": "string", "pattern": "^[0-9]{5}$"}},
      "required": ["street", "zip"], "title": "Address", "type": "object", "additionalProperties": false},
    "Role": {"enum": ["admin", "user", "guest"], "title": "Role", "type": "string"},
    "Pet": {
      "properties": {"name": {"title": "Name", "type": "string", "maxLength": 20},
                     "age": {"anyOf": [{"type": "integer"}, {"type": "null"}], "default": null, "title": "Age"}},
      "required": ["name", "age"], "title": "Pet", "type": "object", "additionalProperties": false}
  },
  "properties": {
    "name": {"description": "Full name", "title": "Name", "type": "string"},
    "role": {"$ref": "#/$defs/Role"},
    "address": {"anyOf": [{"$ref": "#/$defs/Address"}, {"type": "null"}], "default": null},
    "pets": {"items": {"$ref": "#/$defs/Pet"}, "title": "Pets", "type": "array"},
    "tags": {"items": {"type": "string"}, "title": "Tags", "type": "array", "maxItems": 3},
    "score": {"title": "Score", "type": "number"},
    "active": {"title": "Active", "type": "boolean"},
    "born": {"format": "date", "title": "Born", "type": "string"}
  },
  "required": ["name", "role", "address", "pets", "tags", "score", "active", "born"],
  "title": "Person", "type": "object", "additionalProperties": false
})";

TEST(JsonSchemaGrammar, PydanticModel) {
  const std::string ok =
      R"({"name": "Ada", "role": "admin", "address": {"street": "1 Main St", "zip": "12345"},)"
      R"( "pets": [{"name": "Rex", "age": 3}, {"name": "Tom", "age": null}], "tags": ["a", "b"],)"
      R"( "score": 9.5, "active": true, "born": "1815-12-10"})";
  const std::string compact =
      R"({"name":"Bo","role":"guest","address":null,"pets":[],"tags":[],"score":-1,"active":false,"born":"2000-02-29"})";
  auto with = [&](std::string from, const std::string& what, const std::string& to) {
    from.replace(from.find(what), what.size(), to);
    return from;
  };
  expect_accepts(kPydanticSchema, {ok, compact},
                 {with(compact, R"("guest")", R"("root")"),                  // wrong enum
                  with(compact, R"("active":false,)", ""),                  // missing required
                  with(compact, R"("score":-1)", R"("score":"-1")"),        // wrong type
                  with(compact, R"("tags":[])", R"("tags":["a","b","c","d"])"),  // too many items
                  with(compact, R"("address":null)", R"("address":{"street":"x","zip":"1234"})"),  // pattern
                  with(compact, R"("pets":[])", R"("pets":[{"name":"x"}])"),       // nested missing
                  with(compact, R"("born":"2000-02-29")", R"("born":"1900-02-29")"),  // not a leap year
                  with(compact, R"("name":"Bo")", R"("name":"Bo","nick":"B")"),  // extra property
                  with(compact, R"("name":"Bo")", "\"name\":\"B\no\"")});      // raw newline
}

TEST(JsonSchemaGrammar, Formats) {
  expect_accepts(R"({"type":"string","format":"date"})", {R"("2024-02-29")", R"("2000-02-29")", R"("0001-12-31")", R"("1999-04-30")"},
                 {R"("2023-02-29")", R"("1900-02-29")", R"("2023-04-31")", R"("2023-13-01")", R"("0000-01-01")", R"("2023-1-01")"});
  expect_accepts(R"({"type":"string","format":"time"})", {R"("12:30:00Z")", R"("23:59:59.123+02:00")", R"("00:00:00-11:30")"},
                 {R"("24:00:00Z")", R"("12:30:00")", R"("12:60:00Z")", R"("12:30Z")"});
  expect_accepts(R"({"type":"string","format":"date-time"})", {R"("2024-05-06T07:08:09.5Z")"}, {R"("2024-05-06 07:08:09Z")"});
  expect_accepts(R"({"type":"string","format":"uuid"})", {R"("123e4567-e89b-12d3-A456-426614174000")"},
                 {R"("123e4567e89b12d3a456426614174000")", R"("123e4567-e89b-12d3-a456-42661417400g")"});
}

TEST(JsonSchemaGrammar, Patterns) {
  auto p = [](const std::string& pattern) { return R"({"type":"string","pattern":)" + dump_json(Json(pattern)) + "}"; };
  expect_accepts(p("^[a-z_][a-z0-9_]*$"), {R"("abc_1")", R"("_")"}, {R"("1abc")", R"("")", R"("aB")"});
  expect_accepts(p("^\\d{3}-\\d{4}$"), {R"("555-1234")"}, {R"("5555-1234")", R"("555-123")", R"("x555-1234")"});
  // Unanchored: anything before and after.
  expect_accepts(p("abc"), {R"("abc")", R"("xxabcyy")", "\"\xC3\xA9" "abc\\n\""}, {R"("ab")", R"("xabx")"});
  expect_accepts(p("^ab|cd$"), {R"("abz")", R"("zcd")"}, {R"("zab")", R"("cdz")"});
  expect_accepts(p("^(ab|cd){2}$"), {R"("abcd")", R"("cdcd")"}, {R"("ab")", R"("abcdab")"});
  expect_accepts(p("^x?y*z+(?:w{2,3})$"), {R"("zww")", R"("xyyzzwww")"}, {R"("xxzww")", R"("zw")", R"("zwwww")"});
  expect_accepts(p("^a{2,}$"), {R"("aa")", R"("aaaaa")"}, {R"("a")"});
  // Characters JSON must escape are generated escaped; `.` takes multi-byte characters but no \n.
  expect_accepts(p("^a\"b\\\\c$"), {R"("a\"b\\c")"}, {R"("a"b\c")", R"("a\"bc")"});
  expect_accepts(p("^.$"), {R"("x")", "\"\xC3\xA9\"", "\"\xF0\x9F\x98\x80\"", R"("\"")"}, {R"("\n")", R"("")", R"("xy")"});
  expect_accepts(p("^[^0-9]$"), {R"("x")", "\"\xC3\xA9\"", R"("\\")", R"("\n")"}, {R"("5")"});
  expect_accepts(p("^[\\t\\n]+$"), {R"("\t\n")"}, {"\"\t\"", R"("a")"});
  expect_accepts(p("^\\s\\S\\w\\W$"), {R"(" a_!")"}, {R"("aa_!")"});
  expect_accepts(p("^\\u00e9\\.$"), {"\"\xC3\xA9.\""}, {"\"\xC3\xA9x\""});
  expect_accepts(p("^[a\\-z]$"), {R"("-")", R"("a")"}, {R"("b")"});
  expect_accepts(p("^(\\d{1,3}\\.){3}\\d{1,3}$"), {R"("10.0.255.1")"}, {R"("10.0.1")", R"("1000.0.0.1")"});
  // A ? of what can match the empty string is that thing itself.
  expect_accepts(p("^(a*b*)?(c|)?$"), {R"("")", R"("aab")", R"("bc")", R"("c")"}, {R"("ba")", R"("cc")"});

  auto pattern_refusal = [&](const std::string& pattern, const std::string& what) {
    const std::string e = refusal(p(pattern));
    EXPECT_NE(e.find("schema: 'pattern': "), std::string::npos) << pattern << ": " << e;
    EXPECT_NE(e.find(what), std::string::npos) << pattern << ": " << e;
  };
  pattern_refusal("(a*)*", "empty string");
  pattern_refusal("(a)\\1", "'\\1' is not supported");
  pattern_refusal("(?=a)b", "lookaround");
  pattern_refusal("a^b", "'^'");
  pattern_refusal("(a$)", "'$'");
  pattern_refusal("[\xC3\xA9]", "non-ASCII");
  pattern_refusal("\\bword", "word boundary");
  pattern_refusal("(ab", "unterminated group");
  pattern_refusal("a{1,300}", "max_repeat (256)");
  pattern_refusal("*a", "nothing to repeat");
  // Shapes that would make the matcher's work per byte explode (many ways through the empty string,
  // or a product of nested bounds): 2^50 ways for 50 of (a*|b*), 256^2 stacks for the last.
  pattern_refusal("^(a*|b*)c$", "two alternatives that can both match the empty string");
  pattern_refusal("^(a?){4}$", "a repeat of what can match the empty string");
  pattern_refusal("^((a{1,8}){1,8}){1,8}$", "multiply past max_repeat (256)");
}

TEST(JsonSchemaGrammar, RefusalsNameKeywordAndPath) {
  EXPECT_EQ(refusal(R"({"type":"object","properties":{"age":{"type":"integer","minimum":0}}})"),
            "schema.properties.age: 'minimum' is not supported");
  EXPECT_EQ(refusal(R"({"type":"array","items":{"oneOf":[{"type":"string"},{"type":"null"}]}})"),
            "schema.items: 'oneOf' is not supported");
  EXPECT_EQ(refusal(R"({"anyOf":[{"type":"string"},{"type":"number","multipleOf":2}]})"),
            "schema.anyOf[1]: 'multipleOf' is not supported");
  EXPECT_EQ(refusal(R"({"$defs":{"P":{"type":"object","patternProperties":{}}},"$ref":"#/$defs/P"})"),
            "schema.$defs.P: 'patternProperties' is not supported");
  EXPECT_EQ(refusal(R"({"type":"array","prefixItems":[{"type":"string"}]})"), "schema: 'prefixItems' is not supported");
  EXPECT_EQ(refusal(R"({"type":"array","uniqueItems":true})"), "schema: 'uniqueItems' is not supported");
  EXPECT_EQ(refusal(R"({"type":"string","format":"email"})"), "schema: 'format' \"email\" is not supported");
  EXPECT_NE(refusal(R"({"allOf":[{"type":"string"},{"maxLength":3}]})").find("'allOf'"), std::string::npos);
  EXPECT_NE(refusal(R"({"type":"object","properties":{"a":{}},"required":["b"]})").find("'b' is not in 'properties'"),
            std::string::npos);
  EXPECT_EQ(refusal("5"), "schema: a schema must be an object or a boolean");
  EXPECT_EQ(refusal("false"), "schema: the schema false can never be satisfied");
  EXPECT_EQ(refusal(R"({"type":"strin"})"), "schema.type: \"strin\" is not a JSON Schema type");
  EXPECT_NE(refusal(R"({"type":"string","pattern":"a","maxLength":3})").find("'maxLength' with 'pattern'"), std::string::npos);
  // The limits, named.
  EXPECT_EQ(refusal(R"({"type":"array","maxItems":1000})"), "schema.maxItems: 1000 is over max_repeat (256)");
  JsonSchemaLimits few_rules;
  few_rules.max_rules = 50;
  EXPECT_NE(refusal(kPydanticSchema, few_rules).find("max_rules (50)"), std::string::npos);
  JsonSchemaLimits shallow;
  shallow.max_depth = 3;
  EXPECT_NE(refusal(R"({"type":"array","items":{"type":"array","items":{"type":"array","items":{"type":"null"}}}})", shallow)
                .find("max_depth (3)"),
            std::string::npos);
  EXPECT_EQ(refusal(R"({"type":"array","items":{"type":"array","items":{"type":"null"}}})", shallow), "");
}

TEST(JsonSchemaGrammar, AnyValueAndAnyObject) {
  GrammarBuilder b;
  const uint32_t value = json_any_value_rule(b);
  auto gv = b.build(value);
  ASSERT_TRUE(gv.ok()) << gv.error();
  for (const char* v : {"1", "-2.5e3", "\"s\"", "true", "false", "null", "[]", "{}", R"({"a": [1, {"b": [null, "x"]}], "c": {}})"})
    EXPECT_TRUE(accepts(*gv, v)) << v;
  for (const char* v : {"", "[1,]", "{\"a\"}", "tru", "{'a':1}", "[1] [2]"}) EXPECT_FALSE(accepts(*gv, v)) << v;

  GrammarBuilder c;
  const uint32_t object = json_any_object_rule(c);
  auto go = c.build(object);
  ASSERT_TRUE(go.ok()) << go.error();
  EXPECT_TRUE(accepts(*go, R"({"k": [1, 2], "m": {"n": null}})"));
  EXPECT_FALSE(accepts(*go, "[1]"));
  EXPECT_FALSE(accepts(*go, "\"s\""));

  GrammarBuilder d;
  auto gs = d.build(json_space_rule(d));
  ASSERT_TRUE(gs.ok());
  GrammarMatcher m(*gs, nullptr);
  EXPECT_TRUE(m.complete());
  EXPECT_TRUE(m.accepts_bytes(" "));
  EXPECT_TRUE(m.accepts_bytes("\n\t  "));
  EXPECT_FALSE(m.accepts_bytes("  "));
}

}  // namespace
}  // namespace agentkv
