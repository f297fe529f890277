// JSON Schema -> grammar rules (engine/grammar.h), for response_format json_schema / json_object and
// for tool-call arguments. Every keyword that constrains a value is either compiled exactly or
// refused with an error that names it and its place in the schema; annotations (title, description,
// default, examples, $schema, $id, $comment, deprecated, readOnly, writeOnly) are ignored as JSON
// Schema itself ignores them. What the grammar generates always validates against the schema.
//
// The JSON it generates: compact separators with a little optional whitespace (" ", or a newline and
// up to 20 spaces/tabs) between tokens, so a model can write its habitual layout but never loop in
// whitespace; properties in the schema's order (required ones always, optional ones may be left out;
// no undeclared properties where `properties` is given); numbers with at most 16 integer digits,
// 16 fraction digits and 3 exponent digits.
#pragma once

#include <cstdint>
#include <string>

#include "engine/grammar.h"
#include "util/json.h"
#include "util/status.h"

namespace agentkv {

struct JsonSchemaLimits {
  int max_repeat = 256;        // the largest finite minItems / maxItems / minLength / maxLength span
  int max_rules = 20000;       // a schema that needs more rules is refused (it names the limit)
  int max_depth = 32;          // nesting of subschemas ($ref chains count)
};

// The rule of one JSON value that validates against `schema`. `where` names the schema in errors
// ("response_format.json_schema.schema", "tools[0].function.parameters"); an error reads
// "<where>.properties.age: 'multipleOf' is not supported". kInvalidArgument on every refusal.
Result<uint32_t> compile_json_schema(GrammarBuilder& b, const Json& schema, const std::string& where,
                                     const JsonSchemaLimits& limits = {});

// Any JSON value / any JSON object (response_format {"type": "json_object"}), same layout rules.
uint32_t json_any_value_rule(GrammarBuilder& b);
uint32_t json_any_object_rule(GrammarBuilder& b);

// The optional whitespace between JSON tokens (exposed for the tool-call formats that wrap JSON).
uint32_t json_space_rule(GrammarBuilder& b);

}  // namespace agentkv
